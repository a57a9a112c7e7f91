// TEMPORARY stub, replaced by the Gated DeltaNet dispatcher.
#include "attnkit/gdn.h"
namespace attnkit {
#define STUB(fn, T) Status fn(const T&, const ExecOptions&) { return Status::Unsupported(#fn " not implemented yet"); }
STUB(gdn_chunk_forward, GdnChunkArgs)
STUB(gdn_recurrent_forward, GdnChunkArgs)
STUB(gdn_chunk_cumsum, GdnCumsumArgs)
STUB(gdn_kkt_inverse, GdnKktInverseArgs)
STUB(gdn_wu, GdnWuArgs)
STUB(gdn_state_pass, GdnStateArgs)
STUB(gdn_chunk_output, GdnOutputArgs)
STUB(gdn_decode_step, GdnDecodeArgs)
Status gdn_num_chunks(const TensorView&, const TensorView&, int64_t*) { return Status::Unsupported("stub"); }
}  // namespace attnkit
