// expect 6:5 unsupported: value set decl
#include <v1model.p4>
header h_t { bit<8> f; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr) {
    value_set<bit<8>>(4) vs;
    state start {
        transition accept;
    }
}
