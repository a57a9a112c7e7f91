// attnkit: attention kernels for LLM inference. Include this one header.
#pragma once

#include "attnkit/attention.h"
#include "attnkit/gdn.h"
#include "attnkit/kv_cache.h"
#include "attnkit/options.h"
#include "attnkit/quantize.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"
#include "attnkit/version.h"
