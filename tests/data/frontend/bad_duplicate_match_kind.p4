// expect 4:14 range: duplicate match_kind
#include <core.p4>
#include <v1model.p4>
match_kind { range }
