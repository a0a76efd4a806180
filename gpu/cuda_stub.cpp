// The GPU entry points of a build without CUDA: no devices, and every call that needs one throws.
#include "core/error.h"
#include "gpu/copy_rates.h"
#include "gpu/cuda_devices.h"
#include "gpu/cuda_host.h"
#include "gpu/cuda_kernels.h"
#include "gpu/cuda_stream.h"

namespace strata::gpu {
namespace {
constexpr const char* kNoCuda = "this build of strata has no CUDA backend (configure with -DSTRATA_CUDA=ON)";
[[noreturn]] void no_cuda() { throw BackendError(kNoCuda, "rebuild with the CUDA toolkit installed, or run on the CPU"); }
}  // namespace

bool install_cuda_host_pinner() { return false; }
bool host_mapped(const void*, size_t) { return false; }

DeviceList list_devices() { return {{}, kNoCuda}; }

CudaStream::CudaStream() { no_cuda(); }
CudaStream::~CudaStream() = default;
void CudaStream::synchronize() { no_cuda(); }
CudaEvent::CudaEvent() { no_cuda(); }
CudaEvent::~CudaEvent() = default;
void CudaEvent::record(Stream&) { no_cuda(); }
void CudaEvent::wait_on(Stream&) { no_cuda(); }
void CudaEvent::synchronize() { no_cuda(); }
bool CudaEvent::done() const { no_cuda(); }
void copy_h2d(void*, const void*, size_t, CudaStream&) { no_cuda(); }
void copy_d2h(void*, const void*, size_t, CudaStream&) { no_cuda(); }
void copy_d2d(void*, const void*, size_t, CudaStream&) { no_cuda(); }
void fill_zero(void*, size_t, CudaStream&) { no_cuda(); }
void* cuda_malloc_pool(int, uint64_t) { no_cuda(); }
void cuda_free_pool(void*) {}
bool CudaStream::capturing() const { no_cuda(); }
void* CudaStream::scratch(DevicePool&, uint64_t) { no_cuda(); }
std::unique_ptr<Device> make_cuda_device(int, uint64_t, bool) { no_cuda(); }

bool gpu_weight_type(DType) { return false; }
InputFormat input_format(const WeightMatmul&) { no_cuda(); }
uint64_t input_bytes(InputFormat, int64_t, int64_t) { no_cuda(); }
int64_t expand_chunk_rows(int64_t, int64_t) { no_cuda(); }
uint64_t product_scratch_bytes(const WeightMatmul&) { no_cuda(); }
uint64_t max_product_scratch_bytes(int64_t, int64_t) { no_cuda(); }
void prepare_input(const float*, const InputTransform&, int64_t, int64_t, InputFormat, void*, CudaStream&) { no_cuda(); }
void matmul(std::span<const WeightMatmul>, const void*, const std::function<Cublas&()>&, CudaStream&) { no_cuda(); }
uint64_t quantized_acts_bytes(int64_t, int64_t) { no_cuda(); }
void quantize_acts(const float*, int64_t, int64_t, bool, void*, CudaStream&) { no_cuda(); }
void matvec(std::span<const WeightMatmul>, const void*, CudaStream&) { no_cuda(); }
void matmul_tiles(const WeightMatmul&, const void*, CudaStream&) { no_cuda(); }
void copy_mapped_h2d(void*, const void*, size_t, CudaStream&) { no_cuda(); }
void dequantize_rows_f16(DType, const void*, int64_t, int64_t, uint16_t*, CudaStream&) { no_cuda(); }
void convert_f32_to_f16(const float*, uint16_t*, int64_t, CudaStream&) { no_cuda(); }
void convert_f32_to_bf16(const float*, uint16_t*, int64_t, CudaStream&) { no_cuda(); }
Cublas::Cublas() { no_cuda(); }
Cublas::~Cublas() = default;
void Cublas::gemm(DType, const void*, const void*, float*, int64_t, int64_t, int64_t, int64_t, bool, CudaStream&) { no_cuda(); }
void head_matmul(const HeadMatmulArgs&, CudaStream&) { no_cuda(); }
void rms_norm(const float*, const float*, float*, int64_t, int64_t, float, CudaStream&) { no_cuda(); }
void rope(float*, const int32_t*, int64_t, const RopeArgs&, CudaStream&) { no_cuda(); }
void swiglu(float*, const float*, int64_t, CudaStream&) { no_cuda(); }
void add(float*, const float*, int64_t, CudaStream&) { no_cuda(); }
void geglu(float*, const float*, int64_t, CudaStream&) { no_cuda(); }
void softcap(float*, int64_t, float, CudaStream&) { no_cuda(); }
void add_rows(float*, const float*, int64_t, int64_t, CudaStream&) { no_cuda(); }
bool gpu_kv_type(DType) { return false; }
void kv_store(const float*, const KvRows&, CudaStream&) { no_cuda(); }
void rope_qkv_store(const QkvStoreArgs&, CudaStream&) { no_cuda(); }
void kv_gather(const KvRows&, float*, CudaStream&) { no_cuda(); }
void attention(const DecodeAttentionArgs&, CudaStream&) { no_cuda(); }
CopyRates measure_copy_rates(int, size_t) { no_cuda(); }

}  // namespace strata::gpu
