// expect 8:26 action fwd expects 1 arguments, got 0
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t {
        key = { sm.ingress_port: exact; }
        actions = { fwd; }
        default_action = fwd();
    }
    apply { t.apply(); }
}
