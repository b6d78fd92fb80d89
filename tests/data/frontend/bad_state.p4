// expect 8:20 parse_nothing: declaration not found
#include <v1model.p4>
header h_t { bit<8> f; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr) {
    state start {
        pkt.extract(hdr.h);
        transition parse_nothing;
    }
}
