// Exercise 6.4 (exercises/student_moe_slots.hpp) through the checks the reference passes: the
// slots of a mixture-of-experts layer's choices, every kept flag, every kept choice's slot and
// the count dropped, against nn::moe_assign_slots on the whole batch (as nn::MoeLayer's forward
// calls it). Typed over the reference and the student's code (skipped as "not attempted" while
// the stub has CDL_TODO), each test under a deadline:
//   - random routings, top-1 and top-2, 1 to 1000 tokens, 2 to 8 experts, uniform and skewed
//     towards one expert, at capacity factors 1.0, 1.25, 2.0 and dropless;
//   - adversarial ones: every token's first choice to one expert; a second choice that fits only
//     if it goes before later tokens' first choices (written out by hand, so the reference is
//     checked too); the routes of a real MoeLayer forward against its own slots.
// MoeSlotsEx6_4Mistakes holds the same checks to known wrong attempts, the stub's starting
// point among them: each must fail them.
//   ch06_tests --gtest_filter='MoeSlotsEx6_4/student.*'    (what `concurdl exercise ch06` runs)
//   ch06_tests --gtest_filter='MoeSlotsEx6_4*'             (the reference and the mistakes too)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../exercises/student_moe_slots.hpp"
#include "concurdl/core/testing.hpp"
#include "concurdl/nn/moe.hpp"

namespace {

namespace nn = concurdl::nn;
using concurdl::testing::finishes_within;

constexpr int kDeadline = 30;  // every test takes milliseconds

using SlotsFn = std::size_t (*)(std::span<nn::MoeRoute>, std::size_t, std::size_t, std::size_t);

// nn::moe_assign_slots on one whole batch, as MoeLayer's forward calls it: choice c of expert e
// starts after every earlier choice (c' < c) of e, so the second choices start after all the
// first choices.
std::size_t reference_slots(std::span<nn::MoeRoute> routes, std::size_t top_k, std::size_t experts,
                            std::size_t capacity) {
  std::vector<std::size_t> next(top_k * experts, 0);
  const std::size_t tokens = routes.size() / top_k;
  for (std::size_t c = 1; c < top_k; ++c) {
    for (std::size_t e = 0; e < experts; ++e) next[c * experts + e] = next[(c - 1) * experts + e];
    for (std::size_t t = 0; t < tokens; ++t) ++next[c * experts + routes[t * top_k + c - 1].expert];
  }
  return nn::moe_assign_slots(routes, top_k, experts, capacity, next);
}

struct ReferenceSlots {
  static constexpr bool student = false;
  static std::size_t assign(std::span<nn::MoeRoute> routes, std::size_t top_k, std::size_t experts,
                            std::size_t capacity) {
    return reference_slots(routes, top_k, experts, capacity);
  }
};
struct StudentSlots {
  static constexpr bool student = true;
  static std::size_t assign(std::span<nn::MoeRoute> routes, std::size_t top_k, std::size_t experts,
                            std::size_t capacity) {
    return concurdl::mp::student_moe_assign_slots(routes, top_k, experts, capacity);
  }
};

// Names the typed tests' instances "reference" and "student", so that `Suite/student.*` selects
// the student's tests alone.
struct ImplNames {
  template <class T>
  static std::string GetName(int) {
    return T::student ? "student" : "reference";
  }
};

// One batch's choices: the experts (and gates) set, kept and slot not yet.
struct Routing {
  std::string what;
  std::vector<nn::MoeRoute> routes;
  std::size_t top_k = 1, experts = 1, capacity = 0;
};

std::string choice_name(std::size_t c) {
  return c == 0 ? "first" : c == 1 ? "second" : "choice " + std::to_string(c);
}

// The slots `fn` hands out against the reference's: every kept flag, the slot of every kept
// choice, the count dropped, and the experts and gates left alone. `fn` gets routes whose kept
// and slot hold garbage, so a route it leaves alone shows.
::testing::AssertionResult same_slots(SlotsFn fn, const Routing& g) {
  std::vector<nn::MoeRoute> want = g.routes, got = g.routes;
  for (nn::MoeRoute& r : want) r = {.expert = r.expert, .gate = r.gate};
  const std::size_t want_dropped = reference_slots(want, g.top_k, g.experts, g.capacity);
  for (std::size_t i = 0; i < got.size(); ++i) {
    got[i].kept = i % 2 == 0;
    got[i].slot = 0xBADu + static_cast<std::uint32_t>(i);
  }
  const std::size_t got_dropped = fn(got, g.top_k, g.experts, g.capacity);
  // The fact first (`concurdl exercise` shows a message's first 300 characters), then where.
  const std::string where = " [" + g.what + "; " + std::to_string(g.routes.size() / g.top_k) +
                            " tokens, top-" + std::to_string(g.top_k) + ", " +
                            std::to_string(g.experts) + " experts, capacity " +
                            std::to_string(g.capacity) + "]";
  const std::string order =
      g.top_k > 1 ? "; the order is every first choice, then every second choice" : "";
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::size_t t = i / g.top_k, c = i % g.top_k;
    const std::string route = "token " + std::to_string(t) + "'s " + choice_name(c) +
                              " choice (expert " + std::to_string(want[i].expert) + ")";
    if (got[i].expert != want[i].expert || got[i].gate != want[i].gate)
      return ::testing::AssertionFailure()
             << route << ": its expert or gate changed; leave them alone" << where;
    if (got[i].kept != want[i].kept)
      return ::testing::AssertionFailure()
             << route << ": "
             << (got[i].kept ? "kept in slot " + std::to_string(got[i].slot) : "dropped")
             << ", the reference "
             << (want[i].kept ? "keeps it in slot " + std::to_string(want[i].slot)
                              : "drops it (its expert is full by then)")
             << order << where;
    if (want[i].kept && got[i].slot != want[i].slot)
      return ::testing::AssertionFailure()
             << route << ": slot " << got[i].slot << ", the reference's slot is " << want[i].slot
             << order << where;
  }
  if (got_dropped != want_dropped)
    return ::testing::AssertionFailure()
           << "returned " << got_dropped << " dropped, the reference drops " << want_dropped
           << where;
  return ::testing::AssertionSuccess();
}

// A routing drawn at random: each token's top_k distinct experts, uniform, or skewed (half of
// the draws go to expert 0, which then overflows at small capacity factors).
std::vector<nn::MoeRoute> random_routes(std::size_t tokens, std::size_t top_k, std::size_t experts,
                                        bool skewed, std::uint32_t seed) {
  std::uint32_t state = seed * 2654435761u + 12345u;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  std::vector<nn::MoeRoute> routes(tokens * top_k);
  for (std::size_t t = 0; t < tokens; ++t)
    for (std::size_t c = 0; c < top_k; ++c) {
      std::uint32_t e = 0;
      bool taken = true;
      while (taken) {
        e = skewed && next() % 2 == 0 ? 0u : static_cast<std::uint32_t>(next() % experts);
        taken = false;
        for (std::size_t c2 = 0; c2 < c; ++c2) taken = taken || routes[t * top_k + c2].expert == e;
      }
      routes[t * top_k + c] = {.expert = e, .gate = static_cast<float>(next() % 1000) / 1000.0f};
    }
  return routes;
}

// The capacities the tests use: factors 1.0, 1.25 and 2.0 (nn::moe_capacity, the layer's
// formula), and dropless (the number of tokens, as the layer's).
struct Capacity {
  const char* name;
  double factor;  // 0: dropless
};
constexpr Capacity kCapacities[] = {
    {"factor 1.0", 1.0}, {"factor 1.25", 1.25}, {"factor 2.0", 2.0}, {"dropless", 0.0}};

std::size_t capacity_of(const Capacity& cap, std::size_t tokens, std::size_t experts,
                        std::size_t top_k) {
  return cap.factor == 0.0 ? tokens : nn::moe_capacity(tokens, experts, top_k, cap.factor);
}

// Random routings of `top_k`: 1 to 1000 tokens, 2 to 8 experts, uniform and skewed, every
// capacity, three seeds each.
::testing::AssertionResult random_routings(SlotsFn fn, std::size_t top_k) {
  std::uint32_t seed = 1;
  for (std::size_t tokens : {1, 2, 5, 16, 100, 1000})
    for (std::size_t experts : {2, 3, 4, 8})
      for (bool skewed : {false, true})
        for (const Capacity& cap : kCapacities)
          for (int draw = 0; draw < 3; ++draw) {
            const Routing g{std::string(skewed ? "skewed" : "uniform") + " random routing, " +
                                cap.name + ", seed " + std::to_string(seed),
                            random_routes(tokens, top_k, experts, skewed, seed), top_k, experts,
                            capacity_of(cap, tokens, experts, top_k)};
            ++seed;
            if (::testing::AssertionResult r = same_slots(fn, g); !r) return r;
          }
  return ::testing::AssertionSuccess();
}

// Every token's first choice is expert 2 (of 4); with top-2, the second choices go to expert 0,
// or round the other three. Held to the reference, and to the rule written out here: at
// capacity C the first C tokens keep their first choice, in slots 0 .. C - 1, and the rest are
// dropped; no second choice goes to expert 2, so the second choices fill their experts from
// slot 0, in token order.
::testing::AssertionResult all_to_one_expert(SlotsFn fn) {
  constexpr std::size_t kTokens = 10, kExperts = 4;
  const std::uint32_t others[] = {0, 1, 3};
  for (std::size_t top_k : {1, 2})
    for (bool round_robin : {false, true})
      for (const Capacity& cap : kCapacities) {
        if (top_k == 1 && round_robin) continue;
        Routing g{std::string("every first choice to expert 2") +
                      (top_k == 1    ? ""
                       : round_robin ? ", the second choices round the others"
                                     : ", every second choice to expert 0") +
                      ", " + cap.name,
                  {},
                  top_k,
                  kExperts,
                  capacity_of(cap, kTokens, kExperts, top_k)};
        for (std::size_t t = 0; t < kTokens; ++t) {
          g.routes.push_back({.expert = 2, .gate = 0.75f});
          if (top_k == 2)
            g.routes.push_back({.expert = round_robin ? others[t % 3] : 0u, .gate = 0.25f});
        }
        if (::testing::AssertionResult r = same_slots(fn, g); !r) return r;
        std::vector<nn::MoeRoute> mine = g.routes;
        const std::size_t dropped = fn(mine, top_k, kExperts, g.capacity);
        std::vector<std::size_t> filled(kExperts, 0);
        std::size_t want_dropped = 0;
        for (std::size_t c = 0; c < top_k; ++c)
          for (std::size_t t = 0; t < kTokens; ++t) {
            const nn::MoeRoute& r = mine[t * top_k + c];
            const std::size_t position = filled[r.expert]++;
            const bool kept = position < g.capacity;
            if (!kept) ++want_dropped;
            if (r.kept != kept || (kept && r.slot != position))
              return ::testing::AssertionFailure()
                     << g.what << ": token " << t << "'s " << choice_name(c) << " choice: expected "
                     << (kept ? "kept in slot " + std::to_string(position) : "dropped");
          }
        if (dropped != want_dropped)
          return ::testing::AssertionFailure()
                 << g.what << ": " << dropped << " dropped, expected " << want_dropped;
      }
  return ::testing::AssertionSuccess();
}

// A second choice that fits only if it goes before later tokens' first choices. Four tokens,
// four experts, top-2, capacity factor 1.0: C = ceil(1.0 * 2 * 4 / 4) = 2.
//   token 0: expert 0, then 1      first choices:  e0 <- t0 (slot 0); e1 <- t1 (0), t2 (1);
//   token 1: expert 1, then 0                      e3 <- t3 (0)
//   token 2: expert 1, then 2      second choices: t0 -> e1: position 2, dropped (e1 is full);
//   token 3: expert 3, then 2                      t1 -> e0: slot 1; t2 -> e2: slot 0;
//                                                  t3 -> e2: slot 1
// Token by token, token 0's second choice would take e1's slot 0 and token 2's FIRST choice
// would be the one dropped; the count dropped is 1 either way.
Routing second_choice_case() {
  Routing g{"a second choice behind later first choices", {}, 2, 4, 0};
  g.capacity = nn::moe_capacity(4, 4, 2, 1.0);
  const std::uint32_t choices[4][2] = {{0, 1}, {1, 0}, {1, 2}, {3, 2}};
  for (const auto& token : choices) {
    g.routes.push_back({.expert = token[0], .gate = 0.6f});
    g.routes.push_back({.expert = token[1], .gate = 0.4f});
  }
  return g;
}

::testing::AssertionResult second_choice_behind_first_choices(SlotsFn fn) {
  const Routing g = second_choice_case();
  if (g.capacity != 2)
    return ::testing::AssertionFailure() << "moe_capacity(4, 4, 2, 1.0) is " << g.capacity;
  if (::testing::AssertionResult r = same_slots(fn, g); !r) return r;
  // And by hand (so the reference is held to it too): {kept, slot} per route.
  const std::pair<bool, std::uint32_t> want[8] = {{true, 0}, {false, 0}, {true, 0}, {true, 1},
                                                  {true, 1}, {true, 0},  {true, 0}, {true, 1}};
  std::vector<nn::MoeRoute> mine = g.routes;
  const std::size_t dropped = fn(mine, 2, 4, g.capacity);
  for (std::size_t i = 0; i < 8; ++i)
    if (mine[i].kept != want[i].first || (want[i].first && mine[i].slot != want[i].second))
      return ::testing::AssertionFailure()
             << g.what << ": token " << i / 2 << "'s " << choice_name(i % 2) << " choice: expected "
             << (want[i].first ? "kept in slot " + std::to_string(want[i].second) : "dropped");
  if (dropped != 1)
    return ::testing::AssertionFailure() << g.what << ": " << dropped << " dropped, expected 1";
  return ::testing::AssertionSuccess();
}

// The routes of a real layer's forward (its router on random inputs), top-1 and top-2, at each
// capacity: the same slots and drops as the layer's own.
::testing::AssertionResult a_layers_routing(SlotsFn fn) {
  constexpr std::size_t kTokens = 97;
  for (std::size_t top_k : {1, 2})
    for (const Capacity& cap : kCapacities) {
      nn::MoeSpec spec{.width = 6,
                       .hidden = 5,
                       .experts = 4,
                       .top_k = top_k,
                       .capacity_factor = cap.factor == 0.0 ? 1.0 : cap.factor,
                       .dropless = cap.factor == 0.0};
      nn::MoeLayer layer(spec, 11, concurdl::kernels::GemmVersion::v2_ikj);
      std::vector<float> x(kTokens * spec.width), y(x.size());
      std::uint32_t s = 7;
      for (float& v : x) {
        s = s * 1664525u + 1013904223u;
        v = static_cast<float>(s >> 8) * 0x1.0p-22f - 2.0f;
      }
      const nn::MoeStats& stats = layer.forward(x.data(), kTokens, y.data());
      std::vector<nn::MoeRoute> got(layer.routes().begin(), layer.routes().end());
      for (std::size_t i = 0; i < got.size(); ++i) {
        got[i].kept = i % 3 != 0;
        got[i].slot = 999;
      }
      const std::string where = "MoeLayer's forward, top-" + std::to_string(top_k) + ", " +
                                cap.name + " (capacity " + std::to_string(stats.capacity) + ")";
      const std::size_t dropped = fn(got, top_k, spec.experts, stats.capacity);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const nn::MoeRoute& want = layer.routes()[i];
        if (got[i].kept != want.kept || (want.kept && got[i].slot != want.slot))
          return ::testing::AssertionFailure()
                 << where << ": token " << i / top_k << "'s " << choice_name(i % top_k)
                 << " choice (expert " << want.expert << "): "
                 << (got[i].kept ? "kept in slot " + std::to_string(got[i].slot) : "dropped")
                 << ", the layer "
                 << (want.kept ? "kept it in slot " + std::to_string(want.slot) : "dropped it");
      }
      if (dropped != stats.dropped)
        return ::testing::AssertionFailure()
               << where << ": " << dropped << " dropped, the layer dropped " << stats.dropped;
    }
  return ::testing::AssertionSuccess();
}

template <class T>
class MoeSlotsEx6_4 : public ::testing::Test {};
using SlotImpls = ::testing::Types<ReferenceSlots, StudentSlots>;
TYPED_TEST_SUITE(MoeSlotsEx6_4, SlotImpls, ImplNames);

// Each check under the deadline; `ok` keeps the expression gtest prints short.
template <class Check>
void check_within_deadline(Check check) {
  CDL_TRY_EXERCISE(ASSERT_TRUE(finishes_within(kDeadline, [check] {
    const ::testing::AssertionResult ok = check();
    ASSERT_TRUE(ok);
  })));
}

TYPED_TEST(MoeSlotsEx6_4, RandomRoutingsTop1) {
  check_within_deadline([] { return random_routings(&TypeParam::assign, 1); });
}

TYPED_TEST(MoeSlotsEx6_4, ASecondChoiceWaitsForLaterFirstChoices) {
  check_within_deadline([] { return second_choice_behind_first_choices(&TypeParam::assign); });
}

TYPED_TEST(MoeSlotsEx6_4, EveryTokenToOneExpert) {
  check_within_deadline([] { return all_to_one_expert(&TypeParam::assign); });
}

TYPED_TEST(MoeSlotsEx6_4, RandomRoutingsTop2) {
  check_within_deadline([] { return random_routings(&TypeParam::assign, 2); });
}

TYPED_TEST(MoeSlotsEx6_4, AMoeLayersOwnRouting) {
  check_within_deadline([] { return a_layers_routing(&TypeParam::assign); });
}

// --- known wrong attempts: each fails the checks above ------------------------------------------

// The stub's starting point (student_moe_slots.hpp, after its CDL_TODO): token by token, both of
// a token's choices together.
std::size_t token_by_token(std::span<nn::MoeRoute> routes, std::size_t top_k, std::size_t experts,
                           std::size_t capacity) {
  std::vector<std::size_t> filled(experts, 0);
  std::size_t dropped = 0;
  for (std::size_t t = 0; t < routes.size() / top_k; ++t)
    for (std::size_t c = 0; c < top_k; ++c) {
      nn::MoeRoute& r = routes[t * top_k + c];
      const std::size_t position = filled[r.expert]++;
      r.kept = position < capacity;
      r.slot = r.kept ? static_cast<std::uint32_t>(position) : 0;
      if (!r.kept) ++dropped;
    }
  return dropped;
}

// No capacity: every choice kept, in order of arrival.
std::size_t keep_everything(std::span<nn::MoeRoute> routes, std::size_t top_k, std::size_t experts,
                            std::size_t /*capacity*/) {
  return token_by_token(routes, top_k, experts, routes.size());
}

// The right order, but the second choices count their positions from 0 (a buffer of their own)
// instead of after the expert's first choices.
std::size_t second_choices_from_zero(std::span<nn::MoeRoute> routes, std::size_t top_k,
                                     std::size_t experts, std::size_t capacity) {
  std::size_t dropped = 0;
  for (std::size_t c = 0; c < top_k; ++c) {
    std::vector<std::size_t> filled(experts, 0);
    for (std::size_t t = 0; t < routes.size() / top_k; ++t) {
      nn::MoeRoute& r = routes[t * top_k + c];
      const std::size_t position = filled[r.expert]++;
      r.kept = position < capacity;
      r.slot = r.kept ? static_cast<std::uint32_t>(position) : 0;
      if (!r.kept) ++dropped;
    }
  }
  return dropped;
}

TEST(MoeSlotsEx6_4Mistakes, TheStartersTokenByTokenOrderFailsTop2) {
  // Top-1 has one choice per token, so token order is the order: the starter is right there,
  // and only the top-2 checks catch it.
  EXPECT_TRUE(random_routings(&token_by_token, 1));
  const ::testing::AssertionResult random = random_routings(&token_by_token, 2);
  EXPECT_FALSE(random);
  const ::testing::AssertionResult second = second_choice_behind_first_choices(&token_by_token);
  ASSERT_FALSE(second);
  EXPECT_EQ(std::string(second.message()).find("token 0's second choice (expert 1): kept"), 0u)
      << second.message();
  EXPECT_FALSE(a_layers_routing(&token_by_token));
}

TEST(MoeSlotsEx6_4Mistakes, KeepingEverythingFails) {
  EXPECT_FALSE(random_routings(&keep_everything, 1));
  EXPECT_FALSE(random_routings(&keep_everything, 2));
  EXPECT_FALSE(all_to_one_expert(&keep_everything));
  EXPECT_FALSE(second_choice_behind_first_choices(&keep_everything));
}

TEST(MoeSlotsEx6_4Mistakes, SecondChoicesInABufferOfTheirOwnFail) {
  // Right where no expert gets both first and second choices (every first choice to one expert,
  // no second choice to it), and with top-1; wrong wherever they share an expert.
  EXPECT_TRUE(random_routings(&second_choices_from_zero, 1));
  EXPECT_TRUE(all_to_one_expert(&second_choices_from_zero));
  EXPECT_FALSE(random_routings(&second_choices_from_zero, 2));
  EXPECT_FALSE(second_choice_behind_first_choices(&second_choices_from_zero));
  EXPECT_FALSE(a_layers_routing(&second_choices_from_zero));
}

}  // namespace
