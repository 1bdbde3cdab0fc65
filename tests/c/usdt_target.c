/* USDT probes the --usdt end-to-end test records, written with the real
 * <sys/sdt.h> (Debian's systemtap-sdt-dev). Built without optimisation, so
 * the arguments are memory operands (`-4@-20(%rbp)`), beside a constant
 * (`-4@$42`) and a string (`trace_c:greet`: "hello I", I). Every probe here
 * has a semaphore: the kernel raises it while
 * the probe is attached, and `trace_c:guarded` fires only then. */

#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <sys/sdt.h>

unsigned short trace_c_point_semaphore __attribute__((section(".probes")));
unsigned short trace_c_constant_semaphore __attribute__((section(".probes")));
unsigned short trace_c_guarded_semaphore __attribute__((section(".probes")));
unsigned short trace_c_greet_semaphore __attribute__((section(".probes")));

int c_usdt_run(int n);

/* Passes each probe `n` times; returns how often `trace_c:guarded` was
 * enabled (its semaphore raised). */
int c_usdt_run(int n) {
    int enabled = 0;
    for (int i = 0; i < n; i++) {
        long long big = -1000000000000LL * i;
        short small = (short)-i;
        unsigned char byte = (unsigned char)(200 + i);
        STAP_PROBE4(trace_c, point, i, small, big, byte);
        STAP_PROBE1(trace_c, constant, 42);
        char greeting[32];
        snprintf(greeting, sizeof greeting, "hello %d", i);
        const char *name = greeting;
        STAP_PROBE2(trace_c, greet, name, i);
        if (trace_c_guarded_semaphore) {
            enabled++;
            STAP_PROBE1(trace_c, guarded, i);
        }
    }
    return enabled;
}
