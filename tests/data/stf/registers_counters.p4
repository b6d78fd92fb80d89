// Registers (read-add-write), an indexed counter and a direct counter.
#include <core.p4>
#include <v1model.p4>

header data_t {
    bit<32> idx;
    bit<32> val;
    bit<32> total;
}

struct headers_t { data_t data; }
struct meta_t { }

parser RParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.data);
        transition accept;
    }
}

control RVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control RIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) acc;
    counter(16, CounterType.packets_and_bytes) per_index;
    direct_counter(CounterType.packets_and_bytes) fwd_hits;

    action accumulate() {
        bit<32> current;
        acc.read(current, hdr.data.idx);
        current = current + hdr.data.val;
        acc.write(hdr.data.idx, current);
        hdr.data.total = current;
    }
    action set_port(bit<9> port) {
        sm.egress_spec = port;
    }
    table fwd {
        key = { hdr.data.idx: exact; }
        actions = { set_port; }
        counters = fwd_hits;
        default_action = set_port(1);
    }
    apply {
        per_index.count(hdr.data.idx);
        accumulate();
        fwd.apply();
    }
}

control REgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control RCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control RDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.data); }
}

V1Switch(RParser(), RVerify(), RIngress(), REgress(), RCompute(), RDeparser()) main;
