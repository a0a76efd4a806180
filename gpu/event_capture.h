#pragma once
// Events join streams; a captured graph holds one stream's work only (Device::capture): an event
// recorded or waited on while its stream is `capturing` throws BackendError, on every device alike.
namespace strata::gpu {
void refuse_event_in_capture(bool capturing);
}  // namespace strata::gpu
