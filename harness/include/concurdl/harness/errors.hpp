// The three ways a concurdl command fails, and the exit code each maps to:
//   UsageError       bad usage or bad input (a flag, a parameter, a results file)  -> exit 2
//   ValidationError  an experiment produced a wrong result                          -> exit 1
//   NotImplemented   an exercise stub that the student has not filled in (CDL_TODO) -> a skip
#pragma once

#include <stdexcept>
#include <string>

namespace concurdl {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ValidationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NotImplemented : public std::logic_error {
 public:
  explicit NotImplemented(const std::string& exercise)
      : std::logic_error("exercise " + exercise + " not attempted"), exercise_(exercise) {}
  const std::string& exercise() const { return exercise_; }

 private:
  std::string exercise_;
};

}  // namespace concurdl

// In an exercise stub: CDL_TODO("2.3 ticket lock"). Tests turn it into a skip that says
// "exercise 2.3 ticket lock not attempted"; `concurdl exercise` reports it the same way.
#define CDL_TODO(exercise) throw ::concurdl::NotImplemented(exercise)
