/* aggnet_l128.p4: aggnet.p4 with 128 int32 lanes per packet (docs/protocol.md). */
#define AGG_LANES 128
#define AGG_VALUE_BITS 4096      /* AGG_LANES * 32 */
#include "aggnet.p4"
