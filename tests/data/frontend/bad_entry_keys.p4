// expect 9:13 keyset has 2 elements but there are 1 keys
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    action a() {}
    table t {
        key = { sm.ingress_port: exact; }
        actions = { a; }
        const entries = {
            (1, 2): a();
        }
    }
    apply { t.apply(); }
}
