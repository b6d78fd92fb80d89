// Every kind of control-plane object v1model's P4Info describes, for AggNet's P4Info tests.
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header cpu_in_h {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header cpu_out_h {
    @id(7) bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  port;
}

struct headers_t {
    cpu_out_h  cpu_out;
    cpu_in_h   cpu_in;
    ethernet_t ethernet;
}

struct meta_t {
    learn_t learn;
    bit<2>  color;
}

parser CpParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control CpVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control CpIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(64, CounterType.packets) port_packets;
    @brief("bytes per port") counter(64, CounterType.bytes) port_bytes;
    direct_counter(CounterType.packets_and_bytes) mac_hits;
    @name("signed_reg") register<int<16>>(128) sreg;
    meter(32, MeterType.bytes) rate;
    direct_meter<bit<2>>(MeterType.packets) policer_meter;

    action drop() { mark_to_drop(sm); }
    @id(0x01000042) action forward(@id(5) bit<9> port, bit<8> tag) {
        sm.egress_spec = port;
    }
    action learn() {
        meta.learn.srcAddr = hdr.ethernet.srcAddr;
        meta.learn.port = sm.ingress_port;
        digest(1, meta.learn);
    }
    @name(".global_flood") action flood() { sm.mcast_grp = 1; }
    action never_used() { }

    @id(100) table dmac {
        key = {
            hdr.ethernet.dstAddr: exact @name("dst");
            hdr.ethernet.etherType: ternary;
        }
        actions = { forward; @tableonly flood; @defaultonly drop; }
        counters = mac_hits;
        const default_action = drop();
        size = 256;
    }
    table smac {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { learn; NoAction; }
    }
    table ports {
        key = { sm.ingress_port: exact; }
        actions = { forward; drop; }
        const entries = {
            1: forward(2, 0);
            2: forward(1, 0);
        }
        default_action = drop();
    }
    action police() { policer_meter.read(meta.color); }
    table policer {
        key = { sm.ingress_port: exact; }
        actions = { police; }
        meters = policer_meter;
        default_action = police();
    }
    action only_in_unused_table() { }
    table never_applied {
        key = { sm.ingress_port: exact; }
        actions = { only_in_unused_table; }
    }
    @hidden table internal {
        actions = { drop; }
        default_action = drop();
    }
    apply {
        port_packets.count((bit<32>) sm.ingress_port);
        port_bytes.count((bit<32>) sm.ingress_port);
        sreg.write(0, -1);
        rate.execute_meter((bit<32>) sm.ingress_port, meta.color);
        policer.apply();
        dmac.apply();
        smac.apply();
        ports.apply();
        if (sm.ingress_port == 0) {
            internal.apply();
        }
    }
}

control CpEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(8) seen;
    action count_it() { seen.write(0, 1); }
    table eg_stats {
        key = { sm.egress_port: exact; }
        actions = { count_it; }
        default_action = count_it();
    }
    apply { eg_stats.apply(); }
}

control CpCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control CpDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.cpu_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(CpParser(), CpVerify(), CpIngress(), CpEgress(), CpCompute(), CpDeparser()) main;
