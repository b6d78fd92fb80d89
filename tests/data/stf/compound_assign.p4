// Compound assignment (P4 1.2.4): `a op= b` is `a = a op b` for every operator p4c 1.2.5 takes,
// on header fields, a slice, a signed field, a local and an action parameter.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    int<8>  s;
    bit<8>  d;
}

struct headers_t { h_t h; }
struct meta_t { }

parser CParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control CVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control CIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action bump(bit<8> by) { hdr.h.d += by; hdr.h.d <<= 1; }
    apply {
        sm.egress_spec = 2;
        hdr.h.a += 1;
        hdr.h.b -= hdr.h.a;
        hdr.h.a |= 0x40;
        hdr.h.a &= 0xf3;
        hdr.h.a ^= 0x0f;
        hdr.h.a <<= 1;
        hdr.h.a >>= 2;
        hdr.h.a *= 3;
        hdr.h.c += (bit<16>)hdr.h.a;
        hdr.h.c[7:0] -= 1;
        hdr.h.a |+|= 200;
        hdr.h.b |-|= 0x20;
        hdr.h.s >>= 1;
        hdr.h.s -= 10;
        bit<8> x = 5;
        x /= 2;
        bump(x);
    }
}

control CEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control CDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(CParser(), CVerify(), CIngress(), CEgress(), CCompute(), CDeparser()) main;
