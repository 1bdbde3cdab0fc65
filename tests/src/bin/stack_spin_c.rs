//! `stack_spin_c`: `stack_spin` with the spinning functions in C, compiled
//! without frame pointers (`c/stack_spin.c`): the thread named `chain`
//! spins in `spin_c`, called through `spin_a` → `spin_b` → `spin_c`, the
//! thread named `direct` in `spin_d`. For the tests of user stacks unwound
//! from a copy of the stack (DWARF call frame information), not frame
//! pointers. The same arguments and output as `stack_spin`.

use tests::workload::{SpinArgs, spin};

#[link(name = "stack_spin_c", kind = "static")]
unsafe extern "C" {
    fn spin_a(iterations: u64) -> u64;
    fn spin_d(iterations: u64) -> u64;
}

fn main() {
    let report = spin(
        SpinArgs::from_command_line(),
        // SAFETY: plain C functions without preconditions.
        |n| unsafe { spin_a(n) },
        // SAFETY: as above.
        |n| unsafe { spin_d(n) },
    );
    println!("{report}");
}
