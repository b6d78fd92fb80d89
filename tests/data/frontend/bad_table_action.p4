// expect 7:13 nosuch: declaration not found
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    table t {
        key = { sm.ingress_port: exact; }
        actions = {
            nosuch;
            NoAction;
        }
    }
    apply { t.apply(); }
}
