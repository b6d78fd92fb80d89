// The program tests/test_names_are_data.py renames: every `QZ` in a name (an @name, a log_msg
// format; in p4c's JSON also a header type, header, parse state and digest) becomes a crafted
// payload. A frame forwards from ingress port P to the port its table entry names, counted,
// logged and learned on the way.
#include <core.p4>
#include <v1model.p4>

header QZtype_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers {
    QZtype_t QZhdr;
}

struct QZlearn_t {
    bit<9> port;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            511: accept;
            default: QZstate;
        }
    }
    state QZstate {
        packet.extract(hdr.QZhdr);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    @name("QZcounter") counter(4, CounterType.packets) hits;

    @name("QZaction") action set_port(bit<9> port) {
        hits.count(0);
        sm.egress_spec = port;
        log_msg("QZlog {}", {port});
        digest<QZlearn_t>(1, {sm.ingress_port});
    }

    action drop() {
        mark_to_drop(sm);
    }

    @name("QZtable") table fwd {
        key = { sm.ingress_port: exact; }
        actions = { set_port; drop; }
        default_action = drop();
    }

    apply { fwd.apply(); }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.QZhdr); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
