// expect 10:13 other: not an action of table t
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    action a() {}
    action other() {}
    table t { key = { sm.ingress_port: exact; } actions = { a; } }
    apply {
        switch (t.apply().action_run) {
            a: { }
            other: { }
        }
    }
}
