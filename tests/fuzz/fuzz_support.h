#pragma once
// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp): quiet logging, the model files the
// targets load once, and a scratch file for inputs that the code under test reads by path.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>

namespace strata::fuzz {

// Logs would drown libFuzzer's output and slow every iteration.
void quiet_logging();

// $STRATA_FUZZ_MODEL, else the default model (SmolLM2, byte-level BPE) in the model cache.
std::optional<std::filesystem::path> bpe_model_path();
// $STRATA_FUZZ_SPM_MODEL, else ../shared/models/stories260K.gguf beside the sources (SentencePiece).
std::optional<std::filesystem::path> spm_model_path();

// Writes the input to one file per process in /dev/shm (memory, not disk) and returns its
// path: GgufFile reads only from a path.
const std::filesystem::path& write_scratch(const uint8_t* data, size_t size);

}  // namespace strata::fuzz
