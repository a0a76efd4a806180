#pragma once
// Memory freed inside the process handed back to the system.
namespace strata {

// Returns the allocator's free pages to the system (glibc keeps what each thread's arena
// freed); a no-op elsewhere. For after a large object with many threads goes (a model unloaded).
void release_freed_memory();

}  // namespace strata
