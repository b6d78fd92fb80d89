// For loops in actions whose trip count is known only at run time (from the packet or the table entry):
// p4c 1.2.5.16 writes them into BMv2's JSON as jumps back (p4lang/p4c#5552); the embedded target lowers
// them so too. Nested loops, break, continue, return and exit inside a loop, a loop variable declared
// before the loop, a looping action called directly from the apply block with an inout argument, and
// a looping function (a return from its inner loop) called from an action.
#include <core.p4>
#include <v1model.p4>

header loop_t { bit<8> op; bit<8> n; bit<8> k; bit<16> acc; bit<8> steps; bit<8> mark; }
struct headers { loop_t l; }
struct metadata { }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.l); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }

// the first r and c (row by row, each from 1 to n) whose product is over k, as r ++ c; 0 if none is
bit<16> first_over(in bit<8> n, in bit<8> k) {
    for (bit<8> r = 1; r <= n; r = r + 1) {
        for (bit<8> c = 1; c <= n; c = c + 1) {
            if (r * c > k) { return r ++ c; }
        }
    }
    return 0;
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    // acc = 1 + 2 + ... + n
    action triangle() {
        hdr.l.acc = 0;
        for (bit<8> i = 1; i <= hdr.l.n; i = i + 1) { hdr.l.acc = hdr.l.acc + (bit<16>)i; }
    }
    // the same sum as n rows of a growing inner loop; steps counts the rows
    action staircase() {
        hdr.l.acc = 0;
        hdr.l.steps = 0;
        for (bit<8> r = 0; r < hdr.l.n; r = r + 1) {
            for (bit<8> c = 0; c <= r; c = c + 1) { hdr.l.acc = hdr.l.acc + 1; }
            hdr.l.steps = hdr.l.steps + 1;
        }
    }
    // the even i below n up to the entry's k (break there, odd ones skipped); steps: where i stopped
    action stop_at(bit<8> k) {
        bit<8> i;
        hdr.l.acc = 0;
        for (i = 1; i < hdr.l.n; i = i + 1) {
            if (i == k) { break; }
            if ((i & 1) == 1) { continue; }
            hdr.l.acc = hdr.l.acc + (bit<16>)i;
        }
        hdr.l.steps = i;
    }
    // leaves the loop by return at i == k (mark 1), by exit at i == 10 (mark 2), or at its end (mark 3)
    action leave() {
        for (bit<8> i = 0; i < hdr.l.n; i = i + 1) {
            hdr.l.acc = hdr.l.acc + 1;
            if (i == hdr.l.k) { hdr.l.mark = 1; return; }
            if (i == 10) { hdr.l.mark = 2; exit; }
        }
        hdr.l.mark = 3;
    }
    // v modulo 7 by subtraction; steps: how many were taken
    action countdown(inout bit<16> v) {
        for (bit<8> i = 0; v > 7; i = i + 1) { v = v - 7; hdr.l.steps = i + 1; }
    }
    action product() { hdr.l.acc = first_over(hdr.l.n, hdr.l.k); }
    table t {
        key = { hdr.l.op: exact; }
        actions = { triangle; staircase; stop_at; leave; product; }
        default_action = triangle();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.l.op == 5) { countdown(hdr.l.acc); } else { t.apply(); }
        hdr.l.mark = hdr.l.mark + 0x10;  // not after an exit
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.l); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
