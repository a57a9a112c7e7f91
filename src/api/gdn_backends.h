// Backend entry points for Gated DeltaNet, called by the dispatcher in api/gdn.cpp after validation.
// (Filled in by the Gated DeltaNet work: CPU reference in src/cpu, CUDA in src/cuda/gdn.)
#pragma once

#include "attnkit/gdn.h"
