// expect 6:5 syntax error, unexpected '}'
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1
    }
}
