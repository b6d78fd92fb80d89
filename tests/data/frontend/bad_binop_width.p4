// expect 6:26 Cannot unify bit<16> to bit<9>
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<16> b = 2;
        sm.egress_spec = sm.ingress_port + b;
    }
}
