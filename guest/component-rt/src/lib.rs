//! The runtime every Interlock component links instead of Rust std. `no_std` keeps a
//! component's import list to what its own code imports (std would add wasi:cli and
//! wasi:io from its printing, exit and panic paths). A component pulls this in with
//! `use interlock_component_rt as _;`.
#![no_std]
extern crate alloc;

#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// A panic is a broken invariant: the component traps, and the host must not turn that
/// into an error value.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

// Without std nothing links wasi-libc, yet core's slice comparisons call `memcmp` and
// `bcmp`; take them from the target's self-contained libc.a (pure functions, no imports).
#[link(name = "c")]
extern "C" {}

/// The canonical ABI's allocator export. wit-bindgen 0.61 supplies it only for wasip1 and
/// expects std's libc to supply it on wasip2; without std we define it over our allocator.
///
/// # Safety
/// Called by the component model's lowering code with the canonical ABI's contract.
#[no_mangle]
pub unsafe extern "C" fn cabi_realloc(
    old_ptr: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    use alloc::alloc::{alloc, handle_alloc_error, realloc, Layout};
    if new_len == 0 {
        return align as *mut u8;
    }
    let layout;
    let ptr = if old_len == 0 {
        layout = Layout::from_size_align_unchecked(new_len, align);
        alloc(layout)
    } else {
        layout = Layout::from_size_align_unchecked(old_len, align);
        realloc(old_ptr, layout, new_len)
    };
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    ptr
}
