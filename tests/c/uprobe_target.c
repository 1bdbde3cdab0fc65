/* Functions the uprobe end-to-end test probes: called with known nesting. */

int c_recurse(int depth);

/* Through a volatile pointer, so the compiler cannot turn the recursion
 * into a loop: every level is a real call. */
static int (*volatile c_recurse_again)(int) = c_recurse;

/* Recurses `depth` levels; returns the number of calls made. */
__attribute__((noinline)) int c_recurse(int depth) {
    if (depth <= 0) {
        return 1;
    }
    return 1 + c_recurse_again(depth - 1);
}
