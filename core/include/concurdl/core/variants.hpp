// Variant tables: the rows a lesson compares, simplest first, each with one line saying what
// changed from the row before and what that should do to the numbers. A row is a struct that
// derives from VariantInfo and adds its payload (a function, a factory); a table is a view of a
// constant array of rows, kept next to the code it names:
//
//   struct LockVariant : VariantInfo { ContendFn contend; };
//   inline constexpr LockVariant kLockRows[] = {
//       {{"std_mutex", "the baseline: a futex ..."}, &contend<StdMutex>},
//       {{"v1_tas", "test-and-set: ...", {}, /*quick=*/false}, &contend<TasLock>},  // full only
//       {{"uring", "one thread, N reads in flight ...", Capability::uring}, ...},  // needs
//       io_uring
//   };
//   inline constexpr VariantTable kLockVariants{kLockRows};
//
// Experiments, tests, micro-benchmarks and docs iterate over the table: `axis(id)` is an
// experiment's parameter axis (and records the rows' `what` for `concurdl list` and the README
// tables), `find(params)` turns the parameter back into its row, with a usage error that lists
// the known rows or says what a row needs that this program or machine lacks.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "concurdl/core/axis.hpp"
#include "concurdl/core/errors.hpp"
#include "concurdl/core/params.hpp"

namespace concurdl {

// --- optional capabilities -----------------------------------------------------------------------

// What a row may need beyond a plain C++ build: a library found at configure time and, for
// some, the machine's consent (a GPU, a kernel that allows io_uring).
enum class Capability : unsigned char { cuda, mpi, nccl, uring, torch };
inline constexpr Capability kCapabilities[] = {Capability::cuda, Capability::mpi, Capability::nccl,
                                               Capability::uring, Capability::torch};

// A set of capabilities: `.needs = Capability::uring`, `Capability::cuda | Capability::nccl`.
class Needs {
 public:
  constexpr Needs() = default;
  constexpr Needs(Capability c) : bits_(1u << static_cast<unsigned>(c)) {}  // NOLINT: implicit
  friend constexpr Needs operator|(Needs a, Needs b) { return Needs(a.bits_ | b.bits_); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool has(Capability c) const { return (bits_ & Needs(c).bits_) != 0; }
  constexpr bool operator==(const Needs&) const = default;
  // "io_uring", "CUDA + NCCL"; "" when empty.
  std::string text() const;

 private:
  constexpr explicit Needs(unsigned bits) : bits_(bits) {}
  unsigned bits_ = 0;
};
constexpr Needs operator|(Capability a, Capability b) { return Needs(a) | Needs(b); }

// "CUDA", "MPI", "NCCL", "io_uring", "libtorch".
std::string_view capability_title(Capability c);

// "" when this program can use `c` on this machine, else why not: "built without liburing
// (apt-get install liburing-dev, then configure again)", "no CUDA device: ...". Built-in checks
// look at how the program was built (and, for CUDA, at the devices); a chapter that knows more
// registers a probe (below). Answers are cached.
std::string capability_missing(Capability c);
// The first missing capability of `n` and why, as "io_uring: <why>"; "" when all are there.
std::string needs_missing(Needs n);

// A runtime check for a capability the build has: `why_not` returns "" when usable. ch03
// registers io_uring's (the kernel may refuse it). Register it from a header's inline variable
// so that it is in place before any table of a file that includes the header is used: an
// inline variable is initialised before the variables defined after it in every file.
bool register_capability_probe(Capability c, std::function<std::string()> why_not);

// --- rows and tables ---------------------------------------------------------------------------

struct VariantInfo {
  std::string_view name;  // the parameter value, the series label, the test name
  std::string_view what;  // one line: what changed from the row before, what it does to the numbers
  Needs needs{};          // without these the row is not offered (and naming it is a usage error)
  bool quick = true;      // in the quick profile; false: full profile only (too slow for quick)
};

// Which rows: every row of the table (docs), the rows this program can run here, or those of
// them in the quick profile.
enum class Offer { all, here, quick };

// An experiment's choice of rows from a table.
template <class Row>
struct RowSelection {
  bool (*where)(const Row&) = nullptr;  // the experiment's rows; nullptr: every row
  bool all_quick = false;               // every selected row in quick, whatever its flag
};

// What `concurdl list` and the README tables show of one experiment's variant axis.
struct VariantDoc {
  std::string name;
  std::string what;
  Needs needs;
  bool quick = true;  // in this experiment's quick profile
};
struct VariantAxisDoc {
  std::string experiment;  // "ch02/lock_throughput"
  std::string axis;        // "variant", "loader"
  std::vector<VariantDoc> rows;
};

// Recorded by VariantTable::axis(). One variant axis per experiment; recording the same one
// again with other rows is a bug (std::logic_error, found at start).
void describe_variants(VariantAxisDoc doc);
const std::vector<VariantAxisDoc>& variant_docs();
const VariantAxisDoc* find_variant_doc(std::string_view experiment);

template <class Row>
class VariantTable {
  static_assert(std::is_base_of_v<VariantInfo, Row>, "a variant row derives from VariantInfo");

 public:
  using value_type = Row;
  using const_iterator = typename std::span<const Row>::iterator;
  using iterator = const_iterator;

  template <std::size_t N>
  constexpr VariantTable(const Row (&rows)[N], std::string_view axis = "variant")  // NOLINT
      : rows_(rows), axis_(axis) {}
  constexpr VariantTable(std::span<const Row> rows, std::string_view axis = "variant")
      : rows_(rows), axis_(axis) {}

  constexpr auto begin() const { return rows_.begin(); }
  constexpr auto end() const { return rows_.end(); }
  constexpr std::size_t size() const { return rows_.size(); }
  constexpr const Row& operator[](std::size_t i) const { return rows_[i]; }
  constexpr const Row& front() const { return rows_.front(); }
  // The parameter that names a row: "variant" unless the table says otherwise ("loader").
  constexpr std::string_view axis_name() const { return axis_; }

  // The row named `name`, whether or not it can run here; nullptr when there is none.
  constexpr const Row* lookup(std::string_view name) const {
    for (const Row& r : rows_)
      if (r.name == name) return &r;
    return nullptr;
  }

  // The row named `name`, usable here. Bad input is a UsageError (exit 2): "parameter
  // 'variant': unknown variant 'x' (known: a, b, c)", or "parameter 'loader': 'uring' needs
  // io_uring: built without liburing (...)".
  const Row& find(std::string_view name) const {
    const Row* r = lookup(name);
    if (r == nullptr) throw UsageError(unknown_message(name));
    if (std::string why = needs_missing(r->needs); !why.empty())
      throw UsageError(unusable_message(name, why));
    return *r;
  }
  const Row& find(const Params& p) const { return find(param_str(p, axis_)); }

  // The names of the rows on offer, in table order.
  std::vector<std::string> names(Offer offer = Offer::here, RowSelection<Row> sel = {}) const {
    std::vector<std::string> out;
    for (const Row& r : rows_)
      if (selected(r, sel) && offered(r, offer, sel)) out.emplace_back(r.name);
    return out;
  }

  // The experiment's parameter axis over the selected rows that can run here (the quick
  // profile: those of them marked quick), recorded with every selected row's `what` under
  // `experiment` for `concurdl list` and the README tables.
  Axis axis(std::string_view experiment, RowSelection<Row> sel = {}) const {
    VariantAxisDoc doc{std::string(experiment), std::string(axis_), {}};
    for (const Row& r : rows_)
      if (selected(r, sel))
        doc.rows.push_back(
            {std::string(r.name), std::string(r.what), r.needs, sel.all_quick || r.quick});
    describe_variants(std::move(doc));
    Axis a{std::string(axis_), names(Offer::here, sel), names(Offer::quick, sel)};
    if (a.quick == a.values) a.quick.clear();
    a.check = [table = *this, sel](std::string_view name) {
      const Row* r = table.lookup(name);
      if (r == nullptr || !selected(*r, sel)) throw UsageError(table.unknown_message(name, sel));
      (void)table.find(name);
    };
    return a;
  }

  // For each row `where` picks, the listed axes mean nothing (Experiment::inapplicable): the
  // serial variant has no threads, the sync loader no workers.
  std::vector<Inapplicable> inapplicable(bool (*where)(const Row&),
                                         const std::vector<std::string>& axes) const {
    std::vector<Inapplicable> out;
    for (const Row& r : rows_)
      if (where(r)) out.push_back({{{std::string(axis_), std::string(r.name)}}, axes});
    return out;
  }

 private:
  static bool selected(const Row& r, const RowSelection<Row>& sel) {
    return sel.where == nullptr || sel.where(r);
  }
  static bool offered(const Row& r, Offer offer, const RowSelection<Row>& sel) {
    if (offer == Offer::all) return true;
    if (!needs_missing(r.needs).empty()) return false;
    return offer == Offer::here || sel.all_quick || r.quick;
  }
  std::string unknown_message(std::string_view name, RowSelection<Row> sel = {}) const {
    std::string known;
    for (const Row& r : rows_)
      if (selected(r, sel)) known += (known.empty() ? "" : ", ") + std::string(r.name);
    return "parameter '" + std::string(axis_) + "': unknown " + std::string(axis_) + " '" +
           std::string(name) + "' (known: " + known + ")";
  }
  std::string unusable_message(std::string_view name, const std::string& why) const {
    return "parameter '" + std::string(axis_) + "': '" + std::string(name) + "' needs " + why;
  }

  std::span<const Row> rows_;
  std::string_view axis_;
};

template <class Row, std::size_t N>
VariantTable(const Row (&)[N]) -> VariantTable<Row>;
template <class Row, std::size_t N>
VariantTable(const Row (&)[N], std::string_view) -> VariantTable<Row>;

}  // namespace concurdl
