// Ternary matching with priorities: the highest-priority matching entry wins.
#include <core.p4>
#include <v1model.p4>

header data_t {
    bit<32> f1;
    bit<16> h1;
    bit<8>  b1;
    bit<8>  b2;
}

struct headers_t { data_t data; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.data);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action setb1(bit<8> val, bit<9> port) {
        hdr.data.b1 = val;
        sm.egress_spec = port;
    }
    action noop() { }
    table classify {
        key = {
            hdr.data.f1: ternary;
            hdr.data.h1: ternary;
        }
        actions = { setb1; noop; }
        default_action = noop();
    }
    apply {
        sm.egress_spec = 9;
        classify.apply();
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.data); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
