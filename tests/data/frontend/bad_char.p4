// expect 5:26 unexpected character '$'
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = $;
    }
}
