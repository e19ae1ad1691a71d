// Placeholder until the classifier lands: nothing is destructive.
#include "parser/parser.hpp"
namespace predrop::parser {
bool may_matter(std::string_view) { return false; }
bool Facts::destroys() const { return false; }
bool Facts::unresolved() const { return false; }
bool Facts::touches_search_path() const { return false; }
struct Classifier::Impl {};
Classifier::Classifier(size_t) : impl_(std::make_unique<Impl>()) {}
Classifier::~Classifier() = default;
std::shared_ptr<const Facts> Classifier::classify(std::string_view) { return nullptr; }
ClassifierStats Classifier::stats() const { return {}; }
std::string_view to_string(DestroyKind) { return "drop_table"; }
}  // namespace predrop::parser
