#include "runtime/kv_cache.h"

namespace strata {

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv)
    : n_ctx_(n_ctx),
      n_embd_kv_(n_embd_kv),
      size_(static_cast<size_t>(n_layer) * n_ctx * n_embd_kv),
      k_(new float[size_]),
      v_(new float[size_]) {}

}  // namespace strata
