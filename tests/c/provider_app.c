/*
 * The C twin of provider_app: `provider_app_c SECONDS INTERVAL_US` registers
 * as provider-app-c and, until SECONDS have passed, writes a `work`
 * duration around a little computation and a `tick` instant, each with a
 * sequence number, then sleeps INTERVAL_US. Prints its pid and thread id
 * first, its event count last.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "trace/event.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t work(uint64_t seq) {
    TRACE_DURATION("app", "work", TA_UINT64("seq", seq), TA_STRING("lang", "c"));
    uint64_t x = seq;
    for (uint64_t i = 0; i < 2000; i++) x = x * 6364136223846793005ull + i;
    return x;
}

int provider_app_main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 5.0;
    long interval = argc > 2 ? atol(argv[2]) : 2000;
    void *provider = trace_provider_init("provider-app-c");
    printf("pid=%d main=%d\n", (int)getpid(), (int)gettid());
    fflush(stdout);
    double until = now_s() + secs;
    uint64_t seq = 0;
    volatile uint64_t sink = 0;
    while (now_s() < until) {
        sink += work(seq);
        TRACE_INSTANT("app", "tick", TA_UINT64("seq", seq));
        if (TRACE_CATEGORY_ENABLED("app")) TRACE_COUNTER("app", "seq", 1, TA_INT64("value", (int64_t)seq));
        seq++;
        usleep((useconds_t)interval);
    }
    trace_provider_fini(provider);
    printf("main_count=%llu\n", (unsigned long long)seq);
    return 0;
}
