// expect 7:9 exit statements are not allowed in a parser
#include <v1model.p4>
header h_t { bit<8> f; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr) {
    state start {
        exit;
        transition accept;
    }
}
