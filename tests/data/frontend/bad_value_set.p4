// expect 6:15 Unsupported type argument for Value Set
#include <v1model.p4>
header h_t { bit<8> f; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr) {
    value_set<bool>(4) vs;
    state start {
        transition accept;
    }
}
