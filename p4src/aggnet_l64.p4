/* aggnet_l64.p4: aggnet.p4 with 64 int32 lanes per packet (docs/protocol.md). */
#define AGG_LANES 64
#define AGG_VALUE_BITS 2048      /* AGG_LANES * 32 */
#include "aggnet.p4"
