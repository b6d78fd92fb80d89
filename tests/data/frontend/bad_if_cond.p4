// expect 5:13 has type bit<9>, not bool
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        if (sm.ingress_port) {
            sm.egress_spec = 1;
        }
    }
}
