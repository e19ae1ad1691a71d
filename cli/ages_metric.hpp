// predrop_table_version_age_seconds inside serve (issue 25): every metrics.ages_interval_s one
// aggregated read of the store (evidence/ages.hpp) gives each database and schema the histogram of
// its tables' current-version ages, which /metrics then serves as it is (proxy/background_metrics.hpp).
// Its own thread (cli/periodic.hpp) and connection: the relay never waits for it. A failed read
// keeps the last histogram and is logged once until a read succeeds again. The serves of one store
// share the read (evidence::shared_age_histograms): one computes, the others read its result.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/periodic.hpp"
#include "evidence/ages.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

// Buckets that suit days to months: an hour, 6 hours, a day, 3 days, a week, 2 weeks, 30, 60,
// 90 and 180 days, a year.
inline const std::vector<int64_t> kTableAgeBounds = {3600,    21600,   86400,   259200,   604800,  1209600,
                                                     2592000, 5184000, 7776000, 15552000, 31536000};

// The exposition text of the histograms (label values escaped as the text format wants).
std::string render_table_ages(const std::vector<evidence::AgeHistogram>& histograms);

// The reader inside serve, on a thread of its own; null when metrics.ages_interval_s is 0 or there is
// no store.
std::unique_ptr<PeriodicTask> start_ages_metric(std::shared_ptr<const policy::Config> config);

}  // namespace predrop::cli
