/* The spinning functions of `stack_spin_c`, compiled without frame pointers
 * and without inlining or tail calls (tests/build.rs), so that each is a
 * frame of its own that only call frame information can unwind. */

#include <stdint.h>

uint64_t spin_a(uint64_t iterations);
uint64_t spin_b(uint64_t iterations);
uint64_t spin_c(uint64_t iterations);
uint64_t spin_d(uint64_t iterations);

/* A xorshift `iterations` times, shifting by A, B and C; calls nothing.
 * The empty asm keeps the loop from being computed away. A macro, not a
 * function, so that no inlined frame sits on top of the spinning function;
 * each user gives other shifts, so that no two are identical code the
 * compiler may fold into one. */
#define SPIN_LOOP(iterations, A, B, C)              \
    ({                                              \
        uint64_t n_ = (iterations), x_ = n_ | 1;    \
        for (uint64_t i_ = 0; i_ < n_; i_++) {      \
            x_ ^= x_ << (A);                        \
            x_ ^= x_ >> (B);                        \
            x_ ^= x_ << (C);                        \
            __asm__ volatile("" : "+r"(x_));        \
        }                                           \
        x_;                                         \
    })

/* Spins `iterations` times. */
__attribute__((noinline)) uint64_t spin_c(uint64_t iterations) {
    return SPIN_LOOP(iterations, 13, 7, 17);
}

/* Spins `iterations` times. */
__attribute__((noinline)) uint64_t spin_d(uint64_t iterations) {
    return SPIN_LOOP(iterations, 12, 25, 27);
}

/* Calls spin_c, then does a little work of its own. */
__attribute__((noinline)) uint64_t spin_b(uint64_t iterations) {
    return spin_c(iterations) * 3 + 1;
}

/* Calls spin_b, then does a little work of its own. */
__attribute__((noinline)) uint64_t spin_a(uint64_t iterations) {
    return spin_b(iterations) * 3 + 1;
}
