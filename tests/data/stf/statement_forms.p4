// Statement forms p4c 1.2.5 takes: an `@atomic` block (and other annotated blocks), empty blocks
// and statements, `select()` with no keys, and a parser state without a transition (it rejects).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> n; }
struct headers_t { h_t h; }
struct meta_t { }

parser FParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select() { default: check; }
    }
    state check {
        transition select(hdr.h.a) { 0: stop; default: accept; }
    }
    state stop { }
}

control FVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control FIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(1) seen;
    action count() {
        @atomic {
            bit<8> x;
            seen.read(x, 0);
            seen.write(0, x + 1);
            hdr.h.n = x + 1;
        }
    }
    apply {
        { }
        ;
        if (hdr.h.a == 1) { } else { hdr.h.b = hdr.h.b + 1; }
        @atomic { count(); }
        switch (hdr.h.a) { 2: { } default: { } }
        sm.egress_spec = 2;
    }
}

control FEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control FCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control FDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(FParser(), FVerify(), FIngress(), FEgress(), FCompute(), FDeparser()) main;
