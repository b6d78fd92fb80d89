// for loops (P4 1.2.4), unrolled at compile time: a counted loop, break and continue on the loop
// variable, nested loops, a loop variable declared outside (it keeps its final value), one the body
// changes, two loop variables, and an action called in the body.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<8>  d;
    bit<8>  e;
}

struct headers_t { h_t h; }
struct meta_t { }

parser LParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control LVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control LIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action twice() { hdr.h.e = hdr.h.e << 1; }
    apply {
        sm.egress_spec = 3;
        for (bit<8> i = 0; i < 4; i += 1) {
            hdr.h.a = hdr.h.a + i;
        }
        for (bit<8> n = 0; n < 8; n += 1) {
            if (n == 6) { break; }
            if (n % 2 == 1) { continue; }
            hdr.h.b = hdr.h.b + n;
        }
        for (bit<16> x = 0; x < 3; x = x + 1) {
            for (bit<16> y = x; y < 3; y += 1) {
                hdr.h.c = hdr.h.c + (x << 4) + y;
            }
        }
        bit<8> k;
        for (k = 1; k < 100; k = k << 1) { }
        hdr.h.d = hdr.h.d + k;
        for (bit<8> j = 0; j < 8; j = j + 1) {
            j = j + 1;  // the body may change its loop variable: j is 1, 3, 5, 7 here (issue4739.p4)
            hdr.h.d = hdr.h.d + j;
        }
        for (bit<8> u = 0, bit<8> v = 3; u < v; u += 1, v -= 1) {
            twice();
        }
    }
}

control LEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control LCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control LDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(LParser(), LVerify(), LIngress(), LEgress(), LCompute(), LDeparser()) main;
