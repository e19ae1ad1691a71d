// Placeholder until capture lands: every request completes at once as a capture error.
#include "capture/capture.hpp"
namespace predrop::capture {
struct CaptureService::Impl {};
CaptureService::CaptureService(CaptureConfig) : impl_(std::make_unique<Impl>()) {}
CaptureService::~CaptureService() = default;
void CaptureService::snapshot(SnapshotRequest, std::function<void(SnapshotResult)> done) {
  SnapshotResult r; r.outcome = "capture_error"; r.error = "capture not built"; done(std::move(r));
}
void CaptureService::record_event(EventRecord) {}
void CaptureService::confirm_outcomes(std::string, std::vector<PendingOutcome>) {}
void CaptureService::mark_hold(const std::vector<TableResult>&, double) {}
CaptureStats CaptureService::stats() const { return {}; }
void CaptureService::stop() {}
}  // namespace predrop::capture
