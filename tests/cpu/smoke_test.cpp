#include <gtest/gtest.h>
#include "attnkit/attnkit.h"
TEST(Smoke, Version) { EXPECT_STRNE(attnkit::version(), ""); }
