#include "capture/outcome.hpp"

namespace predrop::capture {

const char* to_string(SnapshotOutcome o) {
  switch (o) {
    case SnapshotOutcome::written: return "written";
    case SnapshotOutcome::table_missing: return "table_missing";
    case SnapshotOutcome::timeout: return "timeout";
    case SnapshotOutcome::capture_error: return "capture_error";
    case SnapshotOutcome::store_error: return "store_error";
    case SnapshotOutcome::policy_skip: return "policy_skip";
    case SnapshotOutcome::disabled: return "disabled";
    case SnapshotOutcome::deduplicated: return "deduplicated";
    case SnapshotOutcome::unresolved: return "unresolved";
    case SnapshotOutcome::unparsed: return "unparsed";
    case SnapshotOutcome::not_quarantined: return "not_quarantined";
    case SnapshotOutcome::yielded: return "yielded";
  }
  return "unknown";
}

}  // namespace predrop::capture
