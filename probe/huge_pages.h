#pragma once
// A buffer on 2 MiB pages where the kernel gives them (madvise), as the engine holds its weights:
// on 4 KiB pages a decode matmul streamed a fifth slower here.
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::probe {

struct HugePages {
    static constexpr size_t kPage = 2u << 20;
    std::unique_ptr<void, decltype(&std::free)> mem{nullptr, &std::free};
    uint8_t* data = nullptr;

    HugePages(size_t bytes, const char* what) {
        const size_t n = std::max<size_t>(1, (bytes + kPage - 1) / kPage) * kPage;
        mem.reset(std::aligned_alloc(kPage, n));
        if (!mem) throw IoError(fmt::format("out of memory for the {}-byte {}", n, what), "free some memory or run `strata probe --quick`");
        data = static_cast<uint8_t*>(mem.get());
        ::madvise(data, n, MADV_HUGEPAGE);
    }
};

}  // namespace strata::probe
