// Table entries' priorities as p4c computes them: an entry without one follows the one before it by
// priority_delta (down when the largest wins, up with largest_priority_wins = false), and entries that
// tie keep their written order. Each table's first matching entry writes its byte.
#include <core.p4>
#include <v1model.p4>

header data_t {
    bit<8> k;
    bit<8> largest;
    bit<8> smallest;
    bit<8> tie;
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
    action set_largest(bit<8> v) { hdr.data.largest = v; }
    action set_smallest(bit<8> v) { hdr.data.smallest = v; }
    action set_tie(bit<8> v) { hdr.data.tie = v; }
    table largest {
        key = { hdr.data.k: ternary; }
        actions = { set_largest; }
        priority_delta = 100;
        entries = {
            priority=1000: 0x01 &&& 0x01 : set_largest(1);
                           0x02 &&& 0x02 : set_largest(2);  // 900
                           0x04 &&& 0x04 : set_largest(3);  // 800
            priority=901:  0x08 &&& 0x08 : set_largest(4);  // above 900 and 800
                           0x10 &&& 0x10 : set_largest(5);  // 801: above 800
        }
    }
    table smallest {
        key = { hdr.data.k: ternary; }
        actions = { set_smallest; }
        largest_priority_wins = false;
        priority_delta = 10;
        entries = {
            priority=10: 0x01 &&& 0x01 : set_smallest(1);
                         0x02 &&& 0x02 : set_smallest(2);  // 20
                         0x04 &&& 0x04 : set_smallest(3);  // 30
            priority=15: 0x08 &&& 0x08 : set_smallest(4);  // between 10 and 20
                         0x10 &&& 0x10 : set_smallest(5);  // 25: between 20 and 30
        }
    }
    table tie {
        key = { hdr.data.k: ternary; }
        actions = { set_tie; }
        entries = {
            priority=7: 0x04 &&& 0x04 : set_tie(1);
            priority=7: 0x02 &&& 0x02 : set_tie(2);
            priority=7: 0x01 &&& 0x01 : set_tie(3);
        }
    }
    apply {
        sm.egress_spec = 1;
        largest.apply();
        smallest.apply();
        tie.apply();
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.data); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
