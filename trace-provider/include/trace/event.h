/*
 * trace/event.h: instrument a C program as a trace provider.
 *
 *   void *provider = trace_provider_init("my-server");
 *   TRACE_DURATION("net", "send", TA_UINT64("bytes", n), TA_STRING("peer", peer));
 *   TRACE_INSTANT("net", "connected");
 *   TRACE_COUNTER("mem", "heap", 0, TA_INT64("bytes", heap));
 *   trace_provider_fini(provider);
 *
 * A call site reads its category and name once, the first time it runs (the
 * library copies them), so they should be string literals. With no trace running, or the category disabled, a macro
 * costs one relaxed load and a branch. Defining NTRACE before including this
 * header turns every macro into nothing. Link with the trace-provider library
 * (libtrace_provider.a or .so from the trace-provider-c crate).
 *
 * The macros use GNU C (GCC or Clang): compound literals, `, ##__VA_ARGS__`,
 * statement expressions and the cleanup attribute. C++ cannot take the
 * address of a temporary array; call the trace_* functions directly there.
 */
#ifndef TRACE_EVENT_H_
#define TRACE_EVENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trace_site trace_site_t;

enum {
    TRACE_ARG_NULL = 0,
    TRACE_ARG_INT32 = 1,
    TRACE_ARG_UINT32 = 2,
    TRACE_ARG_INT64 = 3,
    TRACE_ARG_UINT64 = 4,
    TRACE_ARG_DOUBLE = 5,
    TRACE_ARG_STRING = 6,
    TRACE_ARG_POINTER = 7,
    TRACE_ARG_KOID = 8,
    TRACE_ARG_BOOL = 9,
};

enum { TRACE_SCOPE_THREAD = 0, TRACE_SCOPE_PROCESS = 1, TRACE_SCOPE_GLOBAL = 2 };

/* The first byte of a trace_site_t: 0 unregistered, 1 disabled, 2 enabled. */
#define TRACE_SITE_ENABLED 2

typedef struct {
    const char *name;
    uint32_t type;
    uint32_t reserved;
    union {
        int64_t i64;
        uint64_t u64;
        double f64;
        const char *str;
        const void *ptr;
    } value;
} trace_arg_t;

void *trace_provider_init(const char *name);
void trace_provider_fini(void *provider);
const trace_site_t *trace_site(const char *category, const char *name);
int trace_site_enabled(const trace_site_t *site);
/* The provider's timestamp, for trace_duration_complete's start: invariant TSC ticks where
 * the CPU has them, else CLOCK_BOOTTIME nanoseconds (the manager maps both onto the kernel
 * provider's CLOCK_BOOTTIME timeline). */
uint64_t trace_now(void);
void trace_instant(const trace_site_t *site, int scope, const trace_arg_t *args, size_t nargs);
void trace_duration_begin(const trace_site_t *site, const trace_arg_t *args, size_t nargs);
void trace_duration_end(const trace_site_t *site, const trace_arg_t *args, size_t nargs);
void trace_duration_complete(const trace_site_t *site, uint64_t start, const trace_arg_t *args,
                             size_t nargs);
void trace_counter(const trace_site_t *site, uint64_t id, const trace_arg_t *args, size_t nargs);
void trace_async_begin(const trace_site_t *site, uint64_t id, const trace_arg_t *args, size_t nargs);
void trace_async_instant(const trace_site_t *site, uint64_t id, const trace_arg_t *args,
                         size_t nargs);
void trace_async_end(const trace_site_t *site, uint64_t id, const trace_arg_t *args, size_t nargs);
void trace_flow_begin(const trace_site_t *site, uint64_t id, const trace_arg_t *args, size_t nargs);
void trace_flow_step(const trace_site_t *site, uint64_t id, const trace_arg_t *args, size_t nargs);
void trace_flow_end(const trace_site_t *site, uint64_t id, const trace_arg_t *args, size_t nargs);

/* Argument constructors. */
#define TA_NULL(n) ((trace_arg_t){.name = (n), .type = TRACE_ARG_NULL, .reserved = 0, .value = {.u64 = 0}})
#define TA_INT32(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_INT32, .reserved = 0, .value = {.i64 = (int32_t)(v)}})
#define TA_UINT32(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_UINT32, .reserved = 0, .value = {.u64 = (uint32_t)(v)}})
#define TA_INT64(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_INT64, .reserved = 0, .value = {.i64 = (int64_t)(v)}})
#define TA_UINT64(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_UINT64, .reserved = 0, .value = {.u64 = (uint64_t)(v)}})
#define TA_DOUBLE(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_DOUBLE, .reserved = 0, .value = {.f64 = (double)(v)}})
#define TA_STRING(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_STRING, .reserved = 0, .value = {.str = (v)}})
#define TA_POINTER(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_POINTER, .reserved = 0, .value = {.ptr = (const void *)(v)}})
#define TA_KOID(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_KOID, .reserved = 0, .value = {.u64 = (uint64_t)(v)}})
#define TA_BOOL(n, v) ((trace_arg_t){.name = (n), .type = TRACE_ARG_BOOL, .reserved = 0, .value = {.u64 = (v) ? 1u : 0u}})

#ifdef NTRACE

#define TRACE_CATEGORY_ENABLED(cat) 0
#define TRACE_INSTANT(cat, name, ...) do { } while (0)
#define TRACE_INSTANT_SCOPED(scope, cat, name, ...) do { } while (0)
#define TRACE_DURATION_BEGIN(cat, name, ...) do { } while (0)
#define TRACE_DURATION_END(cat, name, ...) do { } while (0)
#define TRACE_DURATION(cat, name, ...)
#define TRACE_COUNTER(cat, name, id, ...) do { } while (0)
#define TRACE_ASYNC_BEGIN(cat, name, id, ...) do { } while (0)
#define TRACE_ASYNC_INSTANT(cat, name, id, ...) do { } while (0)
#define TRACE_ASYNC_END(cat, name, id, ...) do { } while (0)
#define TRACE_FLOW_BEGIN(cat, name, id, ...) do { } while (0)
#define TRACE_FLOW_STEP(cat, name, id, ...) do { } while (0)
#define TRACE_FLOW_END(cat, name, id, ...) do { } while (0)

#else

/* Internal: the call site, fetched once; a racing first call is harmless
 * (trace_site returns the same site for the same strings). */
static inline const trace_site_t *trace_internal_site(const trace_site_t **slot, const char *cat,
                                                      const char *name) {
    const trace_site_t *s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!s) {
        s = trace_site(cat, name);
        __atomic_store_n(slot, s, __ATOMIC_RELEASE);
    }
    return s;
}

static inline int trace_internal_enabled(const trace_site_t **slot, const char *cat,
                                         const char *name) {
    const trace_site_t *s = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (s) {
        unsigned char state = __atomic_load_n((const unsigned char *)s, __ATOMIC_RELAXED);
        if (state == TRACE_SITE_ENABLED) return 1;
        if (state != 0) return 0;
    }
    return trace_site_enabled(trace_internal_site(slot, cat, name));
}

/* The argument array: a leading placeholder keeps the zero-argument case
 * valid C; it is skipped. */
#define TRACE_INTERNAL_ARGS(...) ((const trace_arg_t[]){TA_NULL(""), ##__VA_ARGS__})
#define TRACE_INTERNAL_NARGS(...) \
    (sizeof(TRACE_INTERNAL_ARGS(__VA_ARGS__)) / sizeof(trace_arg_t) - 1)

#define TRACE_INTERNAL_CALL(cat, name, call)                                        \
    do {                                                                            \
        static const trace_site_t *trace_internal_slot;                            \
        if (__builtin_expect(trace_internal_enabled(&trace_internal_slot, cat, name), 0)) { \
            const trace_site_t *trace_internal_s =                                   \
                __atomic_load_n(&trace_internal_slot, __ATOMIC_RELAXED);            \
            call;                                                                   \
        }                                                                           \
    } while (0)

#define TRACE_CATEGORY_ENABLED(cat)                                                 \
    __extension__({                                                                             \
        static const trace_site_t *trace_internal_slot;                            \
        trace_internal_enabled(&trace_internal_slot, cat, "");                     \
    })

#define TRACE_INSTANT_SCOPED(scope, cat, name, ...)                                 \
    TRACE_INTERNAL_CALL(cat, name,                                                  \
                        trace_instant(trace_internal_s, scope,                      \
                                      TRACE_INTERNAL_ARGS(__VA_ARGS__) + 1,         \
                                      TRACE_INTERNAL_NARGS(__VA_ARGS__)))
#define TRACE_INSTANT(cat, name, ...) \
    TRACE_INSTANT_SCOPED(TRACE_SCOPE_THREAD, cat, name, ##__VA_ARGS__)

#define TRACE_INTERNAL_SIMPLE(fn, cat, name, ...)                                   \
    TRACE_INTERNAL_CALL(cat, name,                                                  \
                        fn(trace_internal_s, TRACE_INTERNAL_ARGS(__VA_ARGS__) + 1,  \
                           TRACE_INTERNAL_NARGS(__VA_ARGS__)))
#define TRACE_INTERNAL_ID(fn, cat, name, id, ...)                                   \
    TRACE_INTERNAL_CALL(cat, name,                                                  \
                        fn(trace_internal_s, (uint64_t)(id),                        \
                           TRACE_INTERNAL_ARGS(__VA_ARGS__) + 1,                    \
                           TRACE_INTERNAL_NARGS(__VA_ARGS__)))

#define TRACE_DURATION_BEGIN(cat, name, ...) \
    TRACE_INTERNAL_SIMPLE(trace_duration_begin, cat, name, ##__VA_ARGS__)
#define TRACE_DURATION_END(cat, name, ...) \
    TRACE_INTERNAL_SIMPLE(trace_duration_end, cat, name, ##__VA_ARGS__)
#define TRACE_COUNTER(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_counter, cat, name, id, ##__VA_ARGS__)
#define TRACE_ASYNC_BEGIN(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_async_begin, cat, name, id, ##__VA_ARGS__)
#define TRACE_ASYNC_INSTANT(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_async_instant, cat, name, id, ##__VA_ARGS__)
#define TRACE_ASYNC_END(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_async_end, cat, name, id, ##__VA_ARGS__)
#define TRACE_FLOW_BEGIN(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_flow_begin, cat, name, id, ##__VA_ARGS__)
#define TRACE_FLOW_STEP(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_flow_step, cat, name, id, ##__VA_ARGS__)
#define TRACE_FLOW_END(cat, name, id, ...) \
    TRACE_INTERNAL_ID(trace_flow_end, cat, name, id, ##__VA_ARGS__)

/* TRACE_DURATION: a complete duration from here to the end of the enclosing
 * scope (GCC/Clang cleanup attribute). Arguments are evaluated here. */
typedef struct {
    const trace_site_t *site;
    uint64_t start;
    size_t nargs;
    trace_arg_t args[15];
} trace_internal_scope_t;

static inline void trace_internal_scope_end(trace_internal_scope_t *s) {
    if (s->site) trace_duration_complete(s->site, s->start, s->args, s->nargs);
}

static inline trace_internal_scope_t trace_internal_scope_off(void) {
    trace_internal_scope_t s;
    __builtin_memset(&s, 0, sizeof s);
    return s;
}

static inline trace_internal_scope_t trace_internal_scope_begin(const trace_site_t *site,
                                                                const trace_arg_t *args,
                                                                size_t nargs) {
    trace_internal_scope_t s;
    s.site = site;
    s.nargs = nargs > 15 ? 15 : nargs;
    for (size_t i = 0; i < s.nargs; i++) s.args[i] = args[i];
    s.start = trace_now();
    return s;
}

#define TRACE_INTERNAL_CAT2(a, b) a##b
#define TRACE_INTERNAL_CAT(a, b) TRACE_INTERNAL_CAT2(a, b)
#define TRACE_INTERNAL_UNIQUE(p) TRACE_INTERNAL_CAT(p, __LINE__)

#define TRACE_DURATION(cat, name, ...)                                              \
    static const trace_site_t *TRACE_INTERNAL_UNIQUE(trace_internal_dslot);         \
    __attribute__((cleanup(trace_internal_scope_end))) trace_internal_scope_t      \
        TRACE_INTERNAL_UNIQUE(trace_internal_scope) =                               \
            trace_internal_enabled(&TRACE_INTERNAL_UNIQUE(trace_internal_dslot), cat, name) \
                ? trace_internal_scope_begin(TRACE_INTERNAL_UNIQUE(trace_internal_dslot), \
                                             TRACE_INTERNAL_ARGS(__VA_ARGS__) + 1,  \
                                             TRACE_INTERNAL_NARGS(__VA_ARGS__))     \
                : trace_internal_scope_off()

#endif /* NTRACE */

#ifdef __cplusplus
}
#endif

#endif /* TRACE_EVENT_H_ */
