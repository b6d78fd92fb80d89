// expect 7:9 cannot assign to an 'in' parameter
#include <v1model.p4>
header h_t { bit<8> f; }
struct headers { h_t h; }
control D(packet_out pkt, in headers hdr) {
    apply {
        hdr.h.f = 1;
        pkt.emit(hdr.h);
    }
}
