/*
 * test_ctl_print.c - unit tests of cetcdctl's printers (src/ctl/print.h).
 *
 * Goal: every printer writes, byte for byte, what etcdctl 3.4.23 and the
 * Go libraries it uses write for the same value.
 *
 * Method: the expected texts below (the x_ constants) were printed by a Go
 * 1.19.8 program run against Debian's Go sources of etcd 3.4.23 and its
 * vendored libraries (GOPATH mode): etcdctl's own printers (NewPrinter
 * with "json", "fields", "table", "simple", "protobuf", called from inside
 * package command so that its endpoint structs could be built),
 * json.Marshal, proto Marshal and String, time.Duration.String,
 * humanize.Bytes, strconv.Quote and tablewriter.DisplayWidth.  The tests
 * build the same values as protobuf-c messages, print them to a
 * memstream and compare.  Pasted, never edited by hand.
 */
#define _GNU_SOURCE /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl/print.h"
#include "util/err.h"
#include "util/mem.h"

/* ---- expected (generated) ---- */
/* clang-format off */
static const char x_fields_alarm[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"MemberID\" : 5\n"
    "\"AlarmType\" : NOSPACE\n"
    "\n"
    "\"MemberID\" : 6\n"
    "\"AlarmType\" : NONE\n"
    "\n"
    "\"MemberID\" : 7\n"
    "\"AlarmType\" : 9\n"
    "\n"
    "";
static const char x_fields_dbstatus[] =
    "\"Hash\" : 4294967295\n"
    "\"Revision\" : 12\n"
    "\"Keys\" : 5\n"
    "\"Size\" : 24576\n"
    "";
static const char x_fields_del[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Deleted\" : 2\n"
    "\"PrevKey\" : \"\\x00\\xff<>&\"\n"
    "\"PrevCreateRevision\" : 2\n"
    "\"PrevModRevision\" : 3\n"
    "\"PrevVersion\" : 1\n"
    "\"PrevValue\" : \"h\303\251llo \\u2028\"\n"
    "\"PrevLease\" : 7587862072207832070\n"
    "\"PrevKey\" : \"k\"\n"
    "\"PrevCreateRevision\" : 4\n"
    "\"PrevModRevision\" : 4\n"
    "\"PrevVersion\" : 1\n"
    "\"PrevValue\" : \"\"\n"
    "\"PrevLease\" : 0\n"
    "";
static const char x_fields_grant[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"ID\" : 7587862072207832070\n"
    "\"TTL\" : 60\n"
    "";
static const char x_fields_hashkv[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Endpoint\" : \"e1\"\n"
    "\"Hash\" : 3456789012\n"
    "\n"
    "";
static const char x_fields_health[] =
    "\"Endpoint\" : \"127.0.0.1:2379\"\n"
    "\"Health\" : true\n"
    "\"Took\" : 1.234ms\n"
    "\"Error\" : \n"
    "\n"
    "\"Endpoint\" : \"b\"\n"
    "\"Health\" : false\n"
    "\"Took\" : \n"
    "\"Error\" : context deadline exceeded\n"
    "\n"
    "";
static const char x_fields_keepalive[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"ID\" : 1\n"
    "\"TTL\" : 59\n"
    "";
static const char x_fields_leases[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"ID\" : 1\n"
    "\"ID\" : 2\n"
    "";
static const char x_fields_members[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"ID\" : 13668033151171901709\n"
    "\"Name\" : \"my very long member name with spaces in it ok\"\n"
    "\"PeerURL\" : \"http://127.0.0.1:23801\"\n"
    "\"ClientURL\" : \"http://127.0.0.1:23791\"\n"
    "\"ClientURL\" : \"http://localhost:23791\"\n"
    "\"IsLearner\" : false\n"
    "\n"
    "\"ID\" : 1\n"
    "\"Name\" : \"\"\n"
    "\"PeerURL\" : \"http://a\"\n"
    "\"IsLearner\" : true\n"
    "\n"
    "";
static const char x_fields_put[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"PrevKey\" : \"\\x00\\xff<>&\"\n"
    "\"PrevCreateRevision\" : 2\n"
    "\"PrevModRevision\" : 3\n"
    "\"PrevVersion\" : 1\n"
    "\"PrevValue\" : \"h\303\251llo \\u2028\"\n"
    "\"PrevLease\" : 7587862072207832070\n"
    "";
static const char x_fields_range[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Key\" : \"\\x00\\xff<>&\"\n"
    "\"CreateRevision\" : 2\n"
    "\"ModRevision\" : 3\n"
    "\"Version\" : 1\n"
    "\"Value\" : \"h\303\251llo \\u2028\"\n"
    "\"Lease\" : 7587862072207832070\n"
    "\"Key\" : \"k\"\n"
    "\"CreateRevision\" : 4\n"
    "\"ModRevision\" : 4\n"
    "\"Version\" : 1\n"
    "\"Value\" : \"\"\n"
    "\"Lease\" : 0\n"
    "\"More\" : true\n"
    "\"Count\" : 2\n"
    "";
static const char x_fields_roleget[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"PermType\" :  READ\n"
    "\"Key\" : \"a\"\n"
    "\"RangeEnd\" : \"b\"\n"
    "\"PermType\" :  READWRITE\n"
    "\"Key\" : \"c\\x00\"\n"
    "\"RangeEnd\" : \"\"\n"
    "";
static const char x_fields_rolelist[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Roles\" : \"r1\" \"r\\\"2\"\n"
    "";
static const char x_fields_status[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Version\" : \"3.4.23\"\n"
    "\"DBSize\" : 20480\n"
    "\"Leader\" : 13668033151171901709\n"
    "\"IsLearner\" : true\n"
    "\"RaftIndex\" : 10\n"
    "\"RaftTerm\" : 2\n"
    "\"RaftAppliedIndex\" : 11\n"
    "\"Errors\" : [a b c]\n"
    "\"Endpoint\" : \"e1\"\n"
    "\n"
    "\"ClusterID\" : 0\n"
    "\"MemberID\" : 5\n"
    "\"Revision\" : 0\n"
    "\"RaftTerm\" : 0\n"
    "\"Version\" : \"\"\n"
    "\"DBSize\" : 999999\n"
    "\"Leader\" : 5\n"
    "\"IsLearner\" : false\n"
    "\"RaftIndex\" : 0\n"
    "\"RaftTerm\" : 0\n"
    "\"RaftAppliedIndex\" : 0\n"
    "\"Errors\" : []\n"
    "\"Endpoint\" : \"e2\"\n"
    "\n"
    "";
static const char x_fields_ttl_keys[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"ID\" : 1\n"
    "\"TTL\" : 50\n"
    "\"GrantedTTL\" : 60\n"
    "\"Key\" : \"a\"\n"
    "\"Key\" : \"\\xff\\xfe\"\n"
    "";
static const char x_fields_txn[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Succeeded\" : true\n"
    "\"ClusterID\" : 0\n"
    "\"MemberID\" : 0\n"
    "\"Revision\" : 5\n"
    "\"RaftTerm\" : 0\n"
    "\"More\" : false\n"
    "\"Count\" : 0\n"
    "\"ClusterID\" : 0\n"
    "\"MemberID\" : 0\n"
    "\"Revision\" : 0\n"
    "\"RaftTerm\" : 0\n"
    "\"PrevKey\" : \"k\"\n"
    "\"PrevCreateRevision\" : 4\n"
    "\"PrevModRevision\" : 4\n"
    "\"PrevVersion\" : 1\n"
    "\"PrevValue\" : \"\"\n"
    "\"PrevLease\" : 0\n"
    "\"ClusterID\" : 0\n"
    "\"MemberID\" : 0\n"
    "\"Revision\" : 6\n"
    "\"RaftTerm\" : 0\n"
    "\"Deleted\" : 1\n"
    "\"PrevKey\" : \"k\"\n"
    "\"PrevCreateRevision\" : 4\n"
    "\"PrevModRevision\" : 4\n"
    "\"PrevVersion\" : 1\n"
    "\"PrevValue\" : \"\"\n"
    "\"PrevLease\" : 0\n"
    "\"Unknown\" : \"&{ResponseTxn:header:<revision:7 > succeeded:true responses:<response_put:<> > }\"\n"
    "\"Unknown\" : \"<nil>\"\n"
    "";
static const char x_fields_watch[] =
    "\"ClusterID\" : 15118495548433857066\n"
    "\"MemberID\" : 13668033151171901709\n"
    "\"Revision\" : 42\n"
    "\"RaftTerm\" : 2\n"
    "\"Type\" : PUT\n"
    "\"Key\" : \"k\"\n"
    "\"CreateRevision\" : 4\n"
    "\"ModRevision\" : 4\n"
    "\"Version\" : 1\n"
    "\"Value\" : \"\"\n"
    "\"Lease\" : 0\n"
    "\"Type\" : DELETE\n"
    "\"PrevKey\" : \"k\"\n"
    "\"PrevCreateRevision\" : 4\n"
    "\"PrevModRevision\" : 4\n"
    "\"PrevVersion\" : 1\n"
    "\"PrevValue\" : \"\"\n"
    "\"PrevLease\" : 0\n"
    "\"Key\" : \"k\"\n"
    "\"CreateRevision\" : 0\n"
    "\"ModRevision\" : 9\n"
    "\"Version\" : 0\n"
    "\"Value\" : \"\"\n"
    "\"Lease\" : 0\n"
    "";
static const char x_json_alarm[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"alarms\":[{\"memberID\":5,\"alarm\":1},{\"memberID\":6},{\"memberID\":7,\"alarm\":9}]}\n"
    "";
static const char x_json_compare[] =
    "{\"compare\":[{\"result\":1,\"key\":\"YQ==\",\"TargetUnion\":{\"Version\":0},\"range_end\":\"Yg==\"},{\"target\":3,\"TargetUnion\":{\"Value\":\"\"}},{\"target\":4,\"TargetUnion\":{\"Lease\":-3}}],\"success\":[{\"Request\":{\"RequestRange\":{\"key\":\"YQ==\",\"limit\":3}}}],\"failure\":[{\"Request\":null}]}";
static const char x_json_dbstatus[] =
    "{\"hash\":4294967295,\"revision\":12,\"totalKey\":5,\"totalSize\":24576}\n"
    "";
static const char x_json_grant[] =
    "{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2,\"ID\":7587862072207832070,\"TTL\":60,\"Error\":\"\"}\n"
    "";
static const char x_json_grant_nohdr[] =
    "{\"ID\":-1,\"TTL\":0,\"Error\":\"x\\u003c\"}\n"
    "";
static const char x_json_hashkv[] =
    "[{\"Endpoint\":\"e1\",\"HashKV\":{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"hash\":3456789012,\"compact_revision\":4}}]\n"
    "";
static const char x_json_health[] =
    "[{\"endpoint\":\"127.0.0.1:2379\",\"health\":true,\"took\":\"1.234ms\"},{\"endpoint\":\"b\",\"health\":false,\"took\":\"\",\"error\":\"context deadline exceeded\"}]\n"
    "";
static const char x_json_health0[] =
    "[]\n"
    "";
static const char x_json_keepalive[] =
    "{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2,\"ID\":1,\"TTL\":59}\n"
    "";
static const char x_json_leases[] =
    "{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2,\"leases\":[{\"id\":1},{\"id\":2}]}\n"
    "";
static const char x_json_leases0[] =
    "{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2,\"leases\":[]}\n"
    "";
static const char x_json_members[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"members\":[{\"ID\":13668033151171901709,\"name\":\"my very long member name with spaces in it ok\",\"peerURLs\":[\"http://127.0.0.1:23801\"],\"clientURLs\":[\"http://127.0.0.1:23791\",\"http://localhost:23791\"]},{\"ID\":1,\"peerURLs\":[\"http://a\"],\"isLearner\":true}]}\n"
    "";
static const char x_json_range[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"kvs\":[{\"key\":\"AP88PiY=\",\"create_revision\":2,\"mod_revision\":3,\"version\":1,\"value\":\"aMOpbGxvIOKAqA==\",\"lease\":7587862072207832070},{\"key\":\"aw==\",\"create_revision\":4,\"mod_revision\":4,\"version\":1}],\"more\":true,\"count\":2}\n"
    "";
static const char x_json_revoke[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2}}\n"
    "";
static const char x_json_roleget[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"perm\":[{\"key\":\"YQ==\",\"range_end\":\"Yg==\"},{\"permType\":2,\"key\":\"YwA=\"}]}\n"
    "";
static const char x_json_status[] =
    "[{\"Endpoint\":\"e1\",\"Status\":{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"version\":\"3.4.23\",\"dbSize\":20480,\"leader\":13668033151171901709,\"raftIndex\":10,\"raftTerm\":2,\"raftAppliedIndex\":11,\"errors\":[\"a\",\"b c\"],\"dbSizeInUse\":16384,\"isLearner\":true}},{\"Endpoint\":\"e2\",\"Status\":{\"header\":{\"member_id\":5},\"dbSize\":999999,\"leader\":5}}]\n"
    "";
static const char x_json_str[] =
    "{\"name\":\"\\u0000\\u0001\\u0008\\u000c\\n\\r\\t\\\"\\\\\\u003c\\u003e\\u0026\\u2028\\u2029\177\\ufffd\\ufffd(\303\251\342\202\254\360\235\204\236/\\u001f\",\"password\":\"\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd|\357\277\275|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\"}";
static const char x_json_ttl[] =
    "{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2,\"id\":1,\"ttl\":-1,\"granted-ttl\":0,\"keys\":null}\n"
    "";
static const char x_json_ttl_keys[] =
    "{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2,\"id\":1,\"ttl\":50,\"granted-ttl\":60,\"keys\":[\"YQ==\",\"//4=\"]}\n"
    "";
static const char x_json_txn[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"succeeded\":true,\"responses\":[{\"Response\":{\"ResponseRange\":{\"header\":{\"revision\":5}}}},{\"Response\":{\"ResponsePut\":{\"header\":{},\"prev_kv\":{\"key\":\"aw==\",\"create_revision\":4,\"mod_revision\":4,\"version\":1}}}},{\"Response\":{\"ResponseDeleteRange\":{\"header\":{\"revision\":6},\"deleted\":1,\"prev_kvs\":[{\"key\":\"aw==\",\"create_revision\":4,\"mod_revision\":4,\"version\":1}]}}},{\"Response\":{\"ResponseTxn\":{\"header\":{\"revision\":7},\"succeeded\":true,\"responses\":[{\"Response\":{\"ResponsePut\":{}}}]}}},{\"Response\":null}]}\n"
    "";
static const char x_json_userget[] =
    "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"roles\":[\"r1\",\"r\\u003c2\\u003e\"]}\n"
    "";
static const char x_json_watch[] =
    "{\"Header\":{\"cluster_id\":15118495548433857066,\"member_id\":13668033151171901709,\"revision\":42,\"raft_term\":2},\"Events\":[{\"kv\":{\"key\":\"aw==\",\"create_revision\":4,\"mod_revision\":4,\"version\":1}},{\"type\":1,\"kv\":{\"key\":\"aw==\",\"mod_revision\":9},\"prev_kv\":{\"key\":\"aw==\",\"create_revision\":4,\"mod_revision\":4,\"version\":1}}],\"CompactRevision\":0,\"Canceled\":false,\"Created\":false}\n"
    "";
static const char x_json_watch_nil[] =
    "{\"Header\":{},\"Events\":null,\"CompactRevision\":3,\"Canceled\":true,\"Created\":true}\n"
    "";
static const char x_json_watchreq[] =
    "{\"RequestUnion\":{\"CreateRequest\":{\"key\":\"eA==\",\"filters\":[1,0],\"prev_kv\":true}}}";
static const char x_pb_alarm[] =
    "0a1a08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a200212040805100112020806120408071009";
static const char x_pb_compare[] =
    "0a0b08011a01612000820401620a0410033a000a0d100440fdffffffffffffffff01";
static const char x_pb_grant[] =
    "08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a2002";
static const char x_pb_members[] =
    "0a1a08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a2002128201088df2f48ec1f7a6d7bd01122d6d792076657279206c6f6e67206d656d626572206e616d6520776974682073706163657320696e206974206f6b1a16687474703a2f2f3132372e302e302e313a32333830312216687474703a2f2f3132372e302e302e313a32333739312216687474703a2f2f6c6f63616c686f73743a3233373931120e08011a08687474703a2f2f612801";
static const char x_pb_range[] =
    "0a1a08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a200212230a0500ff3c3e261002180320012a0a68c3a96c6c6f20e280a83086e8edd4a38be0a66912090a016b10041804200118012002";
static const char x_pb_status[] =
    "0a1a08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a20021206332e342e32331880a001208df2f48ec1f7a6d7bd01280a3002380b4201614203622063488080015001";
static const char x_pb_txn[] =
    "0a1a08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a200210011a060a040a0218051a0f120d0a0012090a016b1004180420011a131a110a02180610011a090a016b1004180420011a0c220a0a02180710011a0212001a00";
static const char x_pb_watch[] =
    "0a1a08aaf4e5f599f3ebe7d101108df2f48ec1f7a6d7bd01182a20025a0b12090a016b1004180420015a14080112050a016b18091a090a016b100418042001";
static const char x_pb_watch_nil[] =
    "0a00180120012803";
static const char x_pb_watchreq[] =
    "0a090a01782a0201003001";
static const char x_revoke_err[] =
    "marshal unsupported for type clientv3.LeaseRevokeResponse ({cluster_id:15118495548433857066 member_id:13668033151171901709 revision:42 raft_term:2 })";
static const char x_revoke_err_nil[] =
    "marshal unsupported for type clientv3.LeaseRevokeResponse ({<nil>})";
static const char x_simple_alarm[] =
    "memberID:5 alarm:NOSPACE \n"
    "memberID:6 \n"
    "memberID:7 alarm:9 \n"
    "";
static const char x_simple_dbstatus[] =
    "ffffffff, 12, 5, 25 kB\n"
    "";
static const char x_simple_hashkv[] =
    "e1, 3456789012\n"
    "";
static const char x_simple_members[] =
    "bdae9bbc11dd390d, started, my very long member name with spaces in it ok, http://127.0.0.1:23801, http://127.0.0.1:23791,http://localhost:23791, false\n"
    "1, unstarted, , http://a, , true\n"
    "";
static const char x_simple_range[] =
    "\000\377<>&\n"
    "h\303\251llo \342\200\250\n"
    "k\n"
    "\n"
    "";
static const char x_simple_range_hex[] =
    "\\x00\\xff\\x3c\\x3e\\x26\n"
    "\\x68\\xc3\\xa9\\x6c\\x6c\\x6f\\x20\\xe2\\x80\\xa8\n"
    "\\x6b\n"
    "\n"
    "";
static const char x_simple_status[] =
    "e1, bdae9bbc11dd390d, 3.4.23, 20 kB, true, true, 2, 10, 11, a, b c\n"
    "e2, 5, , 1000 kB, true, false, 0, 0, 0, \n"
    "";
static const char x_table_dbstatus[] =
    "+----------+----------+------------+------------+\n"
    "|   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE |\n"
    "+----------+----------+------------+------------+\n"
    "| ffffffff |       12 |          5 |      25 kB |\n"
    "+----------+----------+------------+------------+\n"
    "";
static const char x_table_emoji[] =
    "+------------------+\n"
    "|        E         |\n"
    "+------------------+\n"
    "| \360\237\230\200\342\200\215\360\237\230\200|\360\237\207\257\360\237\207\265|\341\204\200\341\205\241\341\206\250|\340\244\225\340\244\277|\330\200a|a\314\201\314\201|\360\237\221\215\360\237\217\275 |\n"
    "+------------------+\n"
    "";
static const char x_table_empty[] =
    "+----------+--------+\n"
    "| ENDPOINT | HEALTH |\n"
    "+----------+--------+\n"
    "+----------+--------+\n"
    "";
static const char x_table_esc[] =
    "+--------------------------------+\n"
    "|               C                |\n"
    "+--------------------------------+\n"
    "|                            \033[31mred\033[0m |\n"
    "|                        tab\011here |\n"
    "|                        \033[1234mx |\n"
    "|                  \033[1mbold\033[0m and \033[4mmore\033[0m |\n"
    "|   words to make it wrap around |\n"
    "+--------------------------------+\n"
    "";
static const char x_table_hashkv[] =
    "+----------+------------+\n"
    "| ENDPOINT |    HASH    |\n"
    "+----------+------------+\n"
    "|       e1 | 3456789012 |\n"
    "+----------+------------+\n"
    "";
static const char x_table_hdrwrap[] =
    "+--------------------------------+-----+----+--------+\n"
    "|  A VERY LONG HEADER WITH MANY  | 0.5 | .  | V1.2 X |\n"
    "|        WORDS INSIDE IT         |     |    |        |\n"
    "+--------------------------------+-----+----+--------+\n"
    "|                              x |   y |    |        |\n"
    "+--------------------------------+-----+----+--------+\n"
    "";
static const char x_table_health[] =
    "+----------------+--------+---------+---------------------------+\n"
    "|    ENDPOINT    | HEALTH |  TOOK   |           ERROR           |\n"
    "+----------------+--------+---------+---------------------------+\n"
    "| 127.0.0.1:2379 |   true | 1.234ms |                           |\n"
    "|              b |  false |         | context deadline exceeded |\n"
    "+----------------+--------+---------+---------------------------+\n"
    "";
static const char x_table_members[] =
    "+------------------+-----------+--------------------------------+------------------------+-----------------------------------------------+------------+\n"
    "|        ID        |  STATUS   |              NAME              |       PEER ADDRS       |                 CLIENT ADDRS                  | IS LEARNER |\n"
    "+------------------+-----------+--------------------------------+------------------------+-----------------------------------------------+------------+\n"
    "| bdae9bbc11dd390d |   started |  my very long member name with | http://127.0.0.1:23801 | http://127.0.0.1:23791,http://localhost:23791 |      false |\n"
    "|                  |           |                spaces in it ok |                        |                                               |            |\n"
    "|                1 | unstarted |                                |               http://a |                                               |       true |\n"
    "+------------------+-----------+--------------------------------+------------------------+-----------------------------------------------+------------+\n"
    "";
static const char x_table_narrow[] =
    "+--+---+\n"
    "|  | A |\n"
    "+--+---+\n"
    "|  | p |\n"
    "|    | q |\n"
    "|    | r |\n"
    "|  |   |\n"
    "+--+---+\n"
    "";
static const char x_table_status[] =
    "+----------+------------------+---------+---------+-----------+------------+-----------+------------+--------------------+--------+\n"
    "| ENDPOINT |        ID        | VERSION | DB SIZE | IS LEADER | IS LEARNER | RAFT TERM | RAFT INDEX | RAFT APPLIED INDEX | ERRORS |\n"
    "+----------+------------------+---------+---------+-----------+------------+-----------+------------+--------------------+--------+\n"
    "|       e1 | bdae9bbc11dd390d |  3.4.23 |   20 kB |      true |       true |         2 |         10 |                 11 | a, b c |\n"
    "|       e2 |                5 |         | 1000 kB |      true |      false |         0 |          0 |                  0 |        |\n"
    "+----------+------------------+---------+---------+-----------+------------+-----------+------------+--------------------+--------+\n"
    "";
static const char x_table_utf8[] =
    "+------------------+-----------------+------+\n"
    "|      A B C       |       X 1       |  Y   |\n"
    "+------------------+-----------------+------+\n"
    "| \346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210 |     h\303\251llo w\303\266rld |    e\314\201 |\n"
    "|                a | multi line cell | x  y |\n"
    "|                b |      with words |      |\n"
    "+------------------+-----------------+------+\n"
    "";
static const char x_table_wrap[] =
    "+--------------------------------------------------+\n"
    "|                        H                         |\n"
    "+--------------------------------------------------+\n"
    "|                      aaa bbb ccc ddd eee fff ggg |\n"
    "|                      hhh iii jjj kkk lll mmm nnn |\n"
    "|                                              ooo |\n"
    "| averyveryveryveryveryveryverylongwordthatexceeds |\n"
    "|                                           thirty |\n"
    "|                            one two  three   four |\n"
    "|                                  lead and trail  |\n"
    "|                    a b c d e f g h i j k l m n o |\n"
    "|                    p q r s t u v w x y z 0 1 2 3 |\n"
    "|                                      4 5 6 7 8 9 |\n"
    "+--------------------------------------------------+\n"
    "";
static const char x_text_hdr[] =
    "cluster_id:15118495548433857066 member_id:13668033151171901709 revision:42 raft_term:2 ";
static const char x_text_txn[] =
    "header:<cluster_id:15118495548433857066 member_id:13668033151171901709 revision:42 raft_term:2 > succeeded:true responses:<response_range:<header:<revision:5 > > > responses:<response_put:<header:<> prev_kv:<key:\"k\" create_revision:4 mod_revision:4 version:1 > > > responses:<response_delete_range:<header:<revision:6 > deleted:1 prev_kvs:<key:\"k\" create_revision:4 mod_revision:4 version:1 > > > responses:<response_txn:<header:<revision:7 > succeeded:true responses:<response_put:<> > > > responses:<> ";
static const struct { int64_t ns; const char *s; } x_durations[] = {
    {0LL, "0s"},
    {1LL, "1ns"},
    {999LL, "999ns"},
    {1000LL, "1\302\265s"},
    {1001LL, "1.001\302\265s"},
    {1500LL, "1.5\302\265s"},
    {999999LL, "999.999\302\265s"},
    {1000000LL, "1ms"},
    {1234567LL, "1.234567ms"},
    {1500000LL, "1.5ms"},
    {999999999LL, "999.999999ms"},
    {1000000000LL, "1s"},
    {1000000001LL, "1.000000001s"},
    {2500000000LL, "2.5s"},
    {59999999999LL, "59.999999999s"},
    {60000000000LL, "1m0s"},
    {61000000000LL, "1m1s"},
    {3599999999999LL, "59m59.999999999s"},
    {3600000000000LL, "1h0m0s"},
    {3661000000001LL, "1h1m1.000000001s"},
    {86400000000000LL, "24h0m0s"},
    {-1LL, "-1ns"},
    {-1500000LL, "-1.5ms"},
    {-3661000000000LL, "-1h1m1s"},
    {9223372036854775807LL, "2562047h47m16.854775807s"},
    {INT64_MIN, "-2562047h47m16.854775808s"},
    {-9223372036854775807LL, "-2562047h47m16.854775807s"},
    {100000LL, "100\302\265s"},
    {10000000LL, "10ms"},
    {120000000000LL, "2m0s"},
    {1100LL, "1.1\302\265s"},
    {1000000100LL, "1.0000001s"},
};
static const struct { uint64_t n; const char *s; } x_bytes[] = {
    {0ULL, "0 B"},
    {1ULL, "1 B"},
    {9ULL, "9 B"},
    {10ULL, "10 B"},
    {11ULL, "11 B"},
    {99ULL, "99 B"},
    {100ULL, "100 B"},
    {999ULL, "999 B"},
    {1000ULL, "1.0 kB"},
    {1001ULL, "1.0 kB"},
    {1049ULL, "1.0 kB"},
    {1050ULL, "1.1 kB"},
    {1051ULL, "1.1 kB"},
    {1449ULL, "1.4 kB"},
    {1450ULL, "1.5 kB"},
    {1499ULL, "1.5 kB"},
    {1500ULL, "1.5 kB"},
    {9949ULL, "9.9 kB"},
    {9950ULL, "10 kB"},
    {9999ULL, "10 kB"},
    {10000ULL, "10 kB"},
    {10049ULL, "10 kB"},
    {10050ULL, "10 kB"},
    {20480ULL, "20 kB"},
    {24576ULL, "25 kB"},
    {99949ULL, "100 kB"},
    {99950ULL, "100 kB"},
    {999499ULL, "1000 kB"},
    {999500ULL, "1000 kB"},
    {999949ULL, "1000 kB"},
    {999950ULL, "1000 kB"},
    {999999ULL, "1000 kB"},
    {1000000ULL, "1.0 MB"},
    {1000001ULL, "1.0 MB"},
    {1234567ULL, "1.2 MB"},
    {9999999ULL, "10 MB"},
    {10000000ULL, "10 MB"},
    {999999999ULL, "1000 MB"},
    {1000000000ULL, "1.0 GB"},
    {1000000000000ULL, "1.0 TB"},
    {999999999999999ULL, "1.0 PB"},
    {1000000000000000ULL, "1.0 PB"},
    {1000000000000000000ULL, "1.0 EB"},
    {999999999999999999ULL, "1.0 EB"},
    {18446744073709551615ULL, "18 EB"},
    {2147483648ULL, "2.1 GB"},
    {4294967296ULL, "4.3 GB"},
    {123456789012345ULL, "124 TB"},
    {9999999999999999999ULL, "10 EB"},
    {1310651185258089675ULL, "1.3 EB"},
    {4999999ULL, "5.0 MB"},
    {5000000000000000000ULL, "5.0 EB"},
    {9ULL, "9 B"},
    {10ULL, "10 B"},
    {11ULL, "11 B"},
    {5ULL, "5 B"},
    {4ULL, "4 B"},
    {10ULL, "10 B"},
    {9ULL, "9 B"},
    {99ULL, "99 B"},
    {100ULL, "100 B"},
    {101ULL, "101 B"},
    {50ULL, "50 B"},
    {49ULL, "49 B"},
    {105ULL, "105 B"},
    {104ULL, "104 B"},
    {999ULL, "999 B"},
    {1000ULL, "1.0 kB"},
    {1001ULL, "1.0 kB"},
    {500ULL, "500 B"},
    {499ULL, "499 B"},
    {1050ULL, "1.1 kB"},
    {1049ULL, "1.0 kB"},
    {9999ULL, "10 kB"},
    {10000ULL, "10 kB"},
    {10001ULL, "10 kB"},
    {5000ULL, "5.0 kB"},
    {4999ULL, "5.0 kB"},
    {10500ULL, "10 kB"},
    {10499ULL, "10 kB"},
    {99999ULL, "100 kB"},
    {100000ULL, "100 kB"},
    {100001ULL, "100 kB"},
    {50000ULL, "50 kB"},
    {49999ULL, "50 kB"},
    {105000ULL, "105 kB"},
    {104999ULL, "105 kB"},
    {999999ULL, "1000 kB"},
    {1000000ULL, "1.0 MB"},
    {1000001ULL, "1.0 MB"},
    {500000ULL, "500 kB"},
    {499999ULL, "500 kB"},
    {1050000ULL, "1.1 MB"},
    {1049999ULL, "1.0 MB"},
    {9999999ULL, "10 MB"},
    {10000000ULL, "10 MB"},
    {10000001ULL, "10 MB"},
    {5000000ULL, "5.0 MB"},
    {4999999ULL, "5.0 MB"},
    {10500000ULL, "10 MB"},
    {10499999ULL, "10 MB"},
    {99999999ULL, "100 MB"},
    {100000000ULL, "100 MB"},
    {100000001ULL, "100 MB"},
    {50000000ULL, "50 MB"},
    {49999999ULL, "50 MB"},
    {105000000ULL, "105 MB"},
    {104999999ULL, "105 MB"},
    {999999999ULL, "1000 MB"},
    {1000000000ULL, "1.0 GB"},
    {1000000001ULL, "1.0 GB"},
    {500000000ULL, "500 MB"},
    {499999999ULL, "500 MB"},
    {1050000000ULL, "1.1 GB"},
    {1049999999ULL, "1.0 GB"},
    {9999999999ULL, "10 GB"},
    {10000000000ULL, "10 GB"},
    {10000000001ULL, "10 GB"},
    {5000000000ULL, "5.0 GB"},
    {4999999999ULL, "5.0 GB"},
    {10500000000ULL, "10 GB"},
    {10499999999ULL, "10 GB"},
    {99999999999ULL, "100 GB"},
    {100000000000ULL, "100 GB"},
    {100000000001ULL, "100 GB"},
    {50000000000ULL, "50 GB"},
    {49999999999ULL, "50 GB"},
    {105000000000ULL, "105 GB"},
    {104999999999ULL, "105 GB"},
    {999999999999ULL, "1000 GB"},
    {1000000000000ULL, "1.0 TB"},
    {1000000000001ULL, "1.0 TB"},
    {500000000000ULL, "500 GB"},
    {499999999999ULL, "500 GB"},
    {1050000000000ULL, "1.1 TB"},
    {1049999999999ULL, "1.0 TB"},
    {9999999999999ULL, "10 TB"},
    {10000000000000ULL, "10 TB"},
    {10000000000001ULL, "10 TB"},
    {5000000000000ULL, "5.0 TB"},
    {4999999999999ULL, "5.0 TB"},
    {10500000000000ULL, "10 TB"},
    {10499999999999ULL, "10 TB"},
    {99999999999999ULL, "100 TB"},
    {100000000000000ULL, "100 TB"},
    {100000000000001ULL, "100 TB"},
    {50000000000000ULL, "50 TB"},
    {49999999999999ULL, "50 TB"},
    {105000000000000ULL, "105 TB"},
    {104999999999999ULL, "105 TB"},
    {999999999999999ULL, "1.0 PB"},
    {1000000000000000ULL, "1.0 PB"},
    {1000000000000001ULL, "1.0 PB"},
    {500000000000000ULL, "500 TB"},
    {499999999999999ULL, "500 TB"},
    {1050000000000000ULL, "1.1 PB"},
    {1049999999999999ULL, "1.0 PB"},
    {9999999999999999ULL, "10 PB"},
    {10000000000000000ULL, "10 PB"},
    {10000000000000001ULL, "10 PB"},
    {5000000000000000ULL, "5.0 PB"},
    {4999999999999999ULL, "5.0 PB"},
    {10500000000000000ULL, "10 PB"},
    {10499999999999999ULL, "10 PB"},
    {99999999999999999ULL, "100 PB"},
    {100000000000000000ULL, "100 PB"},
    {100000000000000001ULL, "100 PB"},
    {50000000000000000ULL, "50 PB"},
    {49999999999999999ULL, "50 PB"},
    {105000000000000000ULL, "105 PB"},
    {104999999999999999ULL, "105 PB"},
    {999999999999999999ULL, "1.0 EB"},
    {1000000000000000000ULL, "1.0 EB"},
    {1000000000000000001ULL, "1.0 EB"},
    {500000000000000000ULL, "500 PB"},
    {499999999999999999ULL, "500 PB"},
    {1050000000000000000ULL, "1.1 EB"},
    {1049999999999999999ULL, "1.1 EB"},
    {9999999999999999999ULL, "10 EB"},
    {10000000000000000000ULL, "10 EB"},
    {10000000000000000001ULL, "10 EB"},
    {5000000000000000000ULL, "5.0 EB"},
    {4999999999999999999ULL, "5.0 EB"},
    {10500000000000000000ULL, "10 EB"},
    {10499999999999999999ULL, "10 EB"},
};
static const struct { const char *in; size_t n; const char *s; } x_quotes[] = {
    {"", 0, "\"\""},
    {"abc", 3, "\"abc\""},
    {"\000\001\007\010\014\n"
    "\015\011\013\033\177", 11, "\"\\x00\\x01\\a\\b\\f\\n\\r\\t\\v\\x1b\\x7f\""},
    {"\"\\'", 3, "\"\\\"\\\\'\""},
    {"h\303\251llo", 6, "\"h\303\251llo\""},
    {"\377\376", 2, "\"\\xff\\xfe\""},
    {"\303(", 2, "\"\\xc3(\""},
    {"\302\255\342\200\213\342\200\250\357\273\277", 11, "\"\\u00ad\\u200b\\u2028\\ufeff\""},
    {"\360\237\230\200", 4, "\"\360\237\230\200\""},
    {"\363\240\200\201", 4, "\"\\U000e0001\""},
    {"\355\240\200", 3, "\"\\xed\\xa0\\x80\""},
    {"\364\220\200\200", 4, "\"\\xf4\\x90\\x80\\x80\""},
    {"\357\277\275", 3, "\"\357\277\275\""},
    {"\315\270", 2, "\"\\u0378\""},
    {"\302\240 \343\200\200", 6, "\"\\u00a0 \\u3000\""},
    {"\340\200\257", 3, "\"\\xe0\\x80\\xaf\""},
    {"\360\237\230", 3, "\"\\xf0\\x9f\\x98\""},
    {"\302\205\302\237\302\240", 6, "\"\\u0085\\u009f\\u00a0\""},
    {"\364\217\277\277\363\260\200\200", 8, "\"\\U0010ffff\\U000f0000\""},
    {"<a&b>", 5, "\"<a&b>\""},
};
static const struct { const char *in; size_t w; } x_widths[] = {
    {"", 0},
    {"abc", 3},
    {"\346\227\245\346\234\254\350\252\236", 6},
    {"e\314\201", 1},
    {"\033[31mred\033[0m", 3},
    {"\360\237\230\200\342\200\215\360\237\230\200", 2},
    {"\360\237\207\257\360\237\207\265\360\237\207\257", 2},
    {"\341\204\200\341\205\241\341\206\250", 2},
    {"\340\244\225\340\244\277", 1},
    {"\330\200a", 1},
    {"\357\277\275\377", 2},
    {"tab\011", 3},
    {"\302\255", 0},
    {"\360\237\221\215\360\237\217\275", 2},
    {"a\342\200\215b", 2},
    {"\343\200\200x", 3},
    {"\033[1;2;3mZ\033[K", 1},
};
/* clang-format on */
/* ---- end of expected ---- */

/* ---- capturing output ---- */

struct cap {
    FILE *f;  /* the memstream */
    char *p;  /* its bytes, NUL-terminated after close */
    size_t n; /* their count */
};

static FILE *cap_open(struct cap *c)
{
    memset(c, 0, sizeof *c);
    c->f = open_memstream(&c->p, &c->n);
    assert_non_null(c->f);
    return c->f;
}

/* cap_check closes c and compares its bytes with the C string want. */
static void cap_check(struct cap *c, const char *want)
{
    assert_int_equal(fclose(c->f), 0);
    assert_string_equal(c->p, want);
    assert_int_equal(c->n, strlen(want));
    free(c->p);
}

/* cap_check_n closes c and compares its bytes with the n bytes of want,
 * which may hold NULs. */
static void cap_check_n(struct cap *c, const char *want, size_t n)
{
    assert_int_equal(fclose(c->f), 0);
    assert_int_equal(c->n, n);
    assert_memory_equal(c->p, want, n);
    free(c->p);
}

/* cap_check_hex compares c's bytes, as lower-case hex, with want. */
static void cap_check_hex(struct cap *c, const char *want)
{
    assert_int_equal(fclose(c->f), 0);
    char *hex = calloc(2 * c->n + 1, 1);
    assert_non_null(hex);
    for (size_t i = 0; i < c->n; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)c->p[i]);
    assert_string_equal(hex, want);
    free(hex);
    free(c->p);
}

#define EXPECT(want, ...)                                                      \
    do {                                                                       \
        struct cap c_;                                                         \
        FILE *f = cap_open(&c_);                                               \
        __VA_ARGS__;                                                           \
        cap_check(&c_, want);                                                  \
    } while (0)

/* EXPECT_BIN: want is an array that may hold NULs. */
#define EXPECT_BIN(want, ...)                                                  \
    do {                                                                       \
        struct cap c_;                                                         \
        FILE *f = cap_open(&c_);                                               \
        __VA_ARGS__;                                                           \
        cap_check_n(&c_, want, sizeof want - 1);                               \
    } while (0)

#define EXPECT_HEX(want, ...)                                                  \
    do {                                                                       \
        struct cap c_;                                                         \
        FILE *f = cap_open(&c_);                                               \
        __VA_ARGS__;                                                           \
        cap_check_hex(&c_, want);                                              \
    } while (0)

/* ---- the values, as the Go program built them ---- */

#define BIN(s) ((ProtobufCBinaryData){sizeof(s) - 1, (uint8_t *)(s)})

struct fx {
    Etcdserverpb__ResponseHeader h, h_empty, h5, h6, h7, h_m5;
    Mvccpb__KeyValue kv1, kv2, kvdel;
    Mvccpb__KeyValue *kvs[2], *kv2s[1];
    Etcdserverpb__RangeResponse rng, rng5;
    Etcdserverpb__PutResponse put, put_empty;
    Etcdserverpb__DeleteRangeResponse del;
    Etcdserverpb__TxnResponse txn, txn_inner;
    Etcdserverpb__ResponseOp ops[5], inner_op;
    Etcdserverpb__ResponseOp *opp[5], *inner_opp[1];
    Mvccpb__Event ev[2];
    Mvccpb__Event *evp[2];
    Etcdserverpb__WatchResponse watch, watch_nil;
    Etcdserverpb__Member mem[2];
    Etcdserverpb__Member *memp[2];
    char *peer0[1], *client0[2], *peer1[1];
    Etcdserverpb__MemberListResponse members;
    Etcdserverpb__AlarmMember al[3];
    Etcdserverpb__AlarmMember *alp[3];
    Etcdserverpb__AlarmResponse alarm;
    Authpb__Permission perm[2];
    Authpb__Permission *permp[2];
    Etcdserverpb__AuthRoleGetResponse roleget;
    char *roles[2], *roles2[2];
    Etcdserverpb__AuthRoleListResponse rolelist;
    Etcdserverpb__AuthUserGetResponse userget;
    char *errors[2];
    Etcdserverpb__StatusResponse st, st2;
    Etcdserverpb__HashKVResponse hkv;
    Etcdserverpb__LeaseGrantResponse grant, grant_nohdr;
    Etcdserverpb__LeaseKeepAliveResponse ka;
    Etcdserverpb__LeaseTimeToLiveResponse ttl, ttlk;
    ProtobufCBinaryData keys[2];
    Etcdserverpb__LeaseStatus ls[2];
    Etcdserverpb__LeaseStatus *lsp[2];
    Etcdserverpb__LeaseLeasesResponse leases, leases0;
    Etcdserverpb__LeaseRevokeResponse revoke, revoke_nil;
};

static struct fx X;

static void build_kv(struct fx *x)
{
    static const Etcdserverpb__ResponseHeader h0 =
        ETCDSERVERPB__RESPONSE_HEADER__INIT;
    static const Mvccpb__KeyValue kv0 = MVCCPB__KEY_VALUE__INIT;
    x->h = h0;
    x->h.cluster_id = 15118495548433857066ull;
    x->h.member_id = 13668033151171901709ull;
    x->h.revision = 42;
    x->h.raft_term = 2;
    x->h_empty = x->h5 = x->h6 = x->h7 = x->h_m5 = h0;
    x->h5.revision = 5;
    x->h6.revision = 6;
    x->h7.revision = 7;
    x->h_m5.member_id = 5;
    x->kv1 = x->kv2 = x->kvdel = kv0;
    x->kv1.key = BIN("\000\377<>&");
    x->kv1.create_revision = 2;
    x->kv1.mod_revision = 3;
    x->kv1.version = 1;
    x->kv1.value = BIN("h\303\251llo \342\200\250");
    x->kv1.lease = 7587862072207832070;
    x->kv2.key = BIN("k");
    x->kv2.create_revision = 4;
    x->kv2.mod_revision = 4;
    x->kv2.version = 1;
    x->kvdel.key = BIN("k");
    x->kvdel.mod_revision = 9;
    x->kvs[0] = &x->kv1;
    x->kvs[1] = &x->kv2;
    x->kv2s[0] = &x->kv2;
}

static void build_txn(struct fx *x)
{
    static const Etcdserverpb__RangeResponse r0 =
        ETCDSERVERPB__RANGE_RESPONSE__INIT;
    static const Etcdserverpb__PutResponse p0 =
        ETCDSERVERPB__PUT_RESPONSE__INIT;
    static const Etcdserverpb__DeleteRangeResponse d0 =
        ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
    static const Etcdserverpb__TxnResponse t0 =
        ETCDSERVERPB__TXN_RESPONSE__INIT;
    static const Etcdserverpb__ResponseOp o0 = ETCDSERVERPB__RESPONSE_OP__INIT;
    x->rng = x->rng5 = r0;
    x->rng.header = &x->h;
    x->rng.n_kvs = 2;
    x->rng.kvs = x->kvs;
    x->rng.more = 1;
    x->rng.count = 2;
    x->rng5.header = &x->h5;
    x->put = x->put_empty = p0;
    x->put.header = &x->h_empty;
    x->put.prev_kv = &x->kv2;
    x->del = d0;
    x->del.header = &x->h6;
    x->del.deleted = 1;
    x->del.n_prev_kvs = 1;
    x->del.prev_kvs = x->kv2s;
    x->inner_op = o0;
    x->inner_op.response_case =
        ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
    x->inner_op.response_put = &x->put_empty;
    x->inner_opp[0] = &x->inner_op;
    x->txn = x->txn_inner = t0;
    x->txn_inner.header = &x->h7;
    x->txn_inner.succeeded = 1;
    x->txn_inner.n_responses = 1;
    x->txn_inner.responses = x->inner_opp;
    for (int i = 0; i < 5; i++) {
        x->ops[i] = o0;
        x->opp[i] = &x->ops[i];
    }
    x->ops[0].response_case =
        ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
    x->ops[0].response_range = &x->rng5;
    x->ops[1].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
    x->ops[1].response_put = &x->put;
    x->ops[2].response_case =
        ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
    x->ops[2].response_delete_range = &x->del;
    x->ops[3].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
    x->ops[3].response_txn = &x->txn_inner;
    x->txn.header = &x->h;
    x->txn.succeeded = 1;
    x->txn.n_responses = 5;
    x->txn.responses = x->opp;
}

static void build_watch(struct fx *x)
{
    static const Mvccpb__Event e0 = MVCCPB__EVENT__INIT;
    static const Etcdserverpb__WatchResponse w0 =
        ETCDSERVERPB__WATCH_RESPONSE__INIT;
    x->ev[0] = x->ev[1] = e0;
    x->ev[0].kv = &x->kv2;
    x->ev[1].type = MVCCPB__EVENT__EVENT_TYPE__DELETE;
    x->ev[1].kv = &x->kvdel;
    x->ev[1].prev_kv = &x->kv2;
    x->evp[0] = &x->ev[0];
    x->evp[1] = &x->ev[1];
    x->watch = x->watch_nil = w0;
    x->watch.header = &x->h;
    x->watch.n_events = 2;
    x->watch.events = x->evp;
    x->watch.watch_id = 7; /* not in clientv3's struct: never printed */
    x->watch.fragment = 1;
    x->watch.cancel_reason = "gone";
    x->watch_nil.compact_revision = 3;
    x->watch_nil.canceled = 1;
    x->watch_nil.created = 1;
}

static void build_cluster(struct fx *x)
{
    static const Etcdserverpb__Member m0 = ETCDSERVERPB__MEMBER__INIT;
    static const Etcdserverpb__MemberListResponse l0 =
        ETCDSERVERPB__MEMBER_LIST_RESPONSE__INIT;
    static const Etcdserverpb__AlarmMember a0 =
        ETCDSERVERPB__ALARM_MEMBER__INIT;
    static const Etcdserverpb__AlarmResponse ar0 =
        ETCDSERVERPB__ALARM_RESPONSE__INIT;
    x->mem[0] = x->mem[1] = m0;
    x->mem[0].id = 0xbdae9bbc11dd390dull;
    x->mem[0].name = "my very long member name with spaces in it ok";
    x->peer0[0] = "http://127.0.0.1:23801";
    x->client0[0] = "http://127.0.0.1:23791";
    x->client0[1] = "http://localhost:23791";
    x->mem[0].n_peerurls = 1;
    x->mem[0].peerurls = x->peer0;
    x->mem[0].n_clienturls = 2;
    x->mem[0].clienturls = x->client0;
    x->mem[1].id = 1;
    x->peer1[0] = "http://a";
    x->mem[1].n_peerurls = 1;
    x->mem[1].peerurls = x->peer1;
    x->mem[1].islearner = 1;
    x->memp[0] = &x->mem[0];
    x->memp[1] = &x->mem[1];
    x->members = l0;
    x->members.header = &x->h;
    x->members.n_members = 2;
    x->members.members = x->memp;
    for (int i = 0; i < 3; i++) {
        x->al[i] = a0;
        x->al[i].memberid = 5 + (uint64_t)i;
        x->alp[i] = &x->al[i];
    }
    x->al[0].alarm = ETCDSERVERPB__ALARM_TYPE__NOSPACE;
    x->al[2].alarm = (Etcdserverpb__AlarmType)9;
    x->alarm = ar0;
    x->alarm.header = &x->h;
    x->alarm.n_alarms = 3;
    x->alarm.alarms = x->alp;
}

static void build_auth(struct fx *x)
{
    static const Authpb__Permission p0 = AUTHPB__PERMISSION__INIT;
    static const Etcdserverpb__AuthRoleGetResponse g0 =
        ETCDSERVERPB__AUTH_ROLE_GET_RESPONSE__INIT;
    static const Etcdserverpb__AuthRoleListResponse l0 =
        ETCDSERVERPB__AUTH_ROLE_LIST_RESPONSE__INIT;
    static const Etcdserverpb__AuthUserGetResponse u0 =
        ETCDSERVERPB__AUTH_USER_GET_RESPONSE__INIT;
    x->perm[0] = x->perm[1] = p0;
    x->perm[0].key = BIN("a");
    x->perm[0].range_end = BIN("b");
    x->perm[1].permtype = AUTHPB__PERMISSION__TYPE__READWRITE;
    x->perm[1].key = BIN("c\000");
    x->permp[0] = &x->perm[0];
    x->permp[1] = &x->perm[1];
    x->roleget = g0;
    x->roleget.header = &x->h;
    x->roleget.n_perm = 2;
    x->roleget.perm = x->permp;
    x->roles[0] = "r1";
    x->roles[1] = "r\"2";
    x->rolelist = l0;
    x->rolelist.header = &x->h;
    x->rolelist.n_roles = 2;
    x->rolelist.roles = x->roles;
    x->roles2[0] = "r1";
    x->roles2[1] = "r<2>";
    x->userget = u0;
    x->userget.header = &x->h;
    x->userget.n_roles = 2;
    x->userget.roles = x->roles2;
}

static void build_maint(struct fx *x)
{
    static const Etcdserverpb__StatusResponse s0 =
        ETCDSERVERPB__STATUS_RESPONSE__INIT;
    static const Etcdserverpb__HashKVResponse k0 =
        ETCDSERVERPB__HASH_KVRESPONSE__INIT;
    x->st = x->st2 = s0;
    x->st.header = &x->h;
    x->st.version = "3.4.23";
    x->st.dbsize = 20480;
    x->st.leader = 13668033151171901709ull;
    x->st.raftindex = 10;
    x->st.raftterm = 2;
    x->st.raftappliedindex = 11;
    x->errors[0] = "a";
    x->errors[1] = "b c";
    x->st.n_errors = 2;
    x->st.errors = x->errors;
    x->st.dbsizeinuse = 16384;
    x->st.islearner = 1;
    x->st2.header = &x->h_m5;
    x->st2.leader = 5;
    x->st2.dbsize = 999999;
    x->hkv = k0;
    x->hkv.header = &x->h;
    x->hkv.hash = 3456789012u;
    x->hkv.compact_revision = 4;
    x->hkv.hash_revision = 99; /* etcd 3.5's: etcdctl 3.4 never shows it */
}

static void build_lease(struct fx *x)
{
    static const Etcdserverpb__LeaseGrantResponse g0 =
        ETCDSERVERPB__LEASE_GRANT_RESPONSE__INIT;
    static const Etcdserverpb__LeaseKeepAliveResponse k0 =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
    static const Etcdserverpb__LeaseTimeToLiveResponse t0 =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
    static const Etcdserverpb__LeaseStatus s0 =
        ETCDSERVERPB__LEASE_STATUS__INIT;
    static const Etcdserverpb__LeaseLeasesResponse l0 =
        ETCDSERVERPB__LEASE_LEASES_RESPONSE__INIT;
    static const Etcdserverpb__LeaseRevokeResponse r0 =
        ETCDSERVERPB__LEASE_REVOKE_RESPONSE__INIT;
    x->grant = x->grant_nohdr = g0;
    x->grant.header = &x->h;
    x->grant.id = 7587862072207832070;
    x->grant.ttl = 60;
    x->grant_nohdr.id = -1;
    x->grant_nohdr.error = "x<";
    x->ka = k0;
    x->ka.header = &x->h;
    x->ka.id = 1;
    x->ka.ttl = 59;
    x->ttl = x->ttlk = t0;
    x->ttl.header = x->ttlk.header = &x->h;
    x->ttl.id = x->ttlk.id = 1;
    x->ttl.ttl = -1;
    x->ttlk.ttl = 50;
    x->ttlk.grantedttl = 60;
    x->keys[0] = BIN("a");
    x->keys[1] = BIN("\377\376");
    x->ttlk.n_keys = 2;
    x->ttlk.keys = x->keys;
    x->ls[0] = x->ls[1] = s0;
    x->ls[0].id = 1;
    x->ls[1].id = 2;
    x->lsp[0] = &x->ls[0];
    x->lsp[1] = &x->ls[1];
    x->leases = x->leases0 = l0;
    x->leases.header = x->leases0.header = &x->h;
    x->leases.n_leases = 2;
    x->leases.leases = x->lsp;
    x->revoke = x->revoke_nil = r0;
    x->revoke.header = &x->h;
}

static int setup(void **state)
{
    (void)state;
    build_kv(&X);
    build_txn(&X);
    build_watch(&X);
    build_cluster(&X);
    build_auth(&X);
    build_maint(&X);
    build_lease(&X);
    return 0;
}

static const struct ctl_ep_health health[] = {
    {"127.0.0.1:2379", true, "1.234ms", NULL},
    {"b", false, "", "context deadline exceeded"},
};

static const struct ctl_db_status dbs = {4294967295u, 12, 5, 24576};

/* ---- Go's formatting of single values ---- */

static void test_duration(void **state)
{
    char buf[CTL_DURATION_MAX];
    (void)state;
    for (size_t i = 0; i < sizeof x_durations / sizeof x_durations[0]; i++)
        assert_string_equal(ctl_duration(buf, sizeof buf, x_durations[i].ns),
                            x_durations[i].s);
}

static void test_humanize_bytes(void **state)
{
    char buf[CTL_HUMAN_MAX];
    (void)state;
    for (size_t i = 0; i < sizeof x_bytes / sizeof x_bytes[0]; i++)
        assert_string_equal(ctl_humanize_bytes(buf, sizeof buf, x_bytes[i].n),
                            x_bytes[i].s);
}

static void test_quote(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof x_quotes / sizeof x_quotes[0]; i++)
        EXPECT(x_quotes[i].s, ctl_quote(f, x_quotes[i].in, x_quotes[i].n));
}

static void test_hex_escaped(void **state)
{
    char buf[CTL_ID_MAX];
    (void)state;
    EXPECT("\\x00\\xff\\x3c", ctl_hex_escaped(f, "\000\377<", 3));
    EXPECT("", ctl_hex_escaped(f, NULL, 0));
    assert_string_equal(ctl_id_hex(buf, sizeof buf, 0xbdae9bbc11dd390dull),
                        "bdae9bbc11dd390d");
    assert_string_equal(ctl_id_hex(buf, sizeof buf, 0x1a), "1a");
    assert_string_equal(ctl_id_hex(buf, sizeof buf, UINT64_MAX),
                        "ffffffffffffffff");
}

static void test_display_width(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof x_widths / sizeof x_widths[0]; i++)
        assert_int_equal(
            ctl_display_width(x_widths[i].in, strlen(x_widths[i].in)),
            x_widths[i].w);
}

static void test_simple(void **state)
{
    (void)state;
    EXPECT_BIN(x_simple_range,
               for (size_t i = 0; i < X.rng.n_kvs; i++)
                   ctl_simple_kv(f, false, false, X.rng.kvs[i]));
    EXPECT(x_simple_range_hex, for (size_t i = 0; i < X.rng.n_kvs; i++)
                                   ctl_simple_kv(f, true, false, X.rng.kvs[i]));
    EXPECT("\n", ctl_simple_kv(f, false, true, &X.kvdel));
    EXPECT(
        x_simple_alarm, for (size_t i = 0; i < X.alarm.n_alarms; i++) {
            ctl_text_message(f, &X.alarm.alarms[i]->base);
            fputc('\n', f);
        });
}

/* ---- JSON ---- */

static void test_json_string(void **state)
{
    Etcdserverpb__AuthUserAddRequest r =
        ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
    (void)state;
    /* A C string cannot hold the leading NUL: print it by hand. */
    EXPECT("\"\\u0000\\u0001\"", ctl_json_string(f, "\000\001", 2));
    r.name = "\001\010\014\n\r\t\"\\<>&\342\200\250\342\200\251\177\377\303("
             "\303\251\342\202\254\360\235\204\236/\037";
    r.password = "\355\240\200|\364\220\200\200|\357\277\275|\340\200|\360\237"
                 "\230";
    /* The Go value begins with a NUL the C one lacks. */
    const char *want = x_json_str;
    const char *skip = "{\"name\":\"\\u0000";
    assert_memory_equal(want, skip, strlen(skip));
    char buf[512];
    snprintf(buf, sizeof buf, "{\"name\":\"%s\n", want + strlen(skip));
    EXPECT(buf, ctl_json_message(f, &r.base));
}

static void test_json_message(void **state)
{
    (void)state;
    EXPECT(x_json_range, ctl_json_message(f, &X.rng.base));
    EXPECT(x_json_txn, ctl_json_message(f, &X.txn.base));
    EXPECT(x_json_members, ctl_json_message(f, &X.members.base));
    EXPECT(x_json_alarm, ctl_json_message(f, &X.alarm.base));
    EXPECT(x_json_roleget, ctl_json_message(f, &X.roleget.base));
    EXPECT(x_json_userget, ctl_json_message(f, &X.userget.base));
    EXPECT(x_json_revoke, ctl_json_message(f, &X.revoke.base));
    EXPECT("null\n", ctl_json_message(f, NULL));
}

static void test_json_oneof(void **state)
{
    Etcdserverpb__Compare c[3] = {ETCDSERVERPB__COMPARE__INIT,
                                  ETCDSERVERPB__COMPARE__INIT,
                                  ETCDSERVERPB__COMPARE__INIT};
    Etcdserverpb__Compare *cp[3] = {&c[0], &c[1], &c[2]};
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__RequestOp ops[2] = {ETCDSERVERPB__REQUEST_OP__INIT,
                                      ETCDSERVERPB__REQUEST_OP__INIT};
    Etcdserverpb__RequestOp *succ[1] = {&ops[0]}, *fail[1] = {&ops[1]};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    (void)state;
    c[0].result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER;
    c[0].key = BIN("a");
    c[0].range_end = BIN("b");
    c[0].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
    c[1].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
    c[1].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    c[2].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
    c[2].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
    c[2].lease = -3;
    rr.key = BIN("a");
    rr.limit = 3;
    ops[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    ops[0].request_range = &rr;
    t.n_compare = 3;
    t.compare = cp;
    t.n_success = 1;
    t.success = succ;
    t.n_failure = 1;
    t.failure = fail;
    char want[1024];
    snprintf(want, sizeof want, "%s\n", x_json_compare);
    EXPECT(want, ctl_json_message(f, &t.base));
    t.n_success = t.n_failure = 0;
    EXPECT_HEX(x_pb_compare, ctl_pb_message(f, &t.base));

    Etcdserverpb__WatchCreateRequest cr =
        ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    Etcdserverpb__WatchCreateRequest__FilterType filters[2] = {1, 0};
    Etcdserverpb__WatchRequest w = ETCDSERVERPB__WATCH_REQUEST__INIT;
    cr.key = BIN("x");
    cr.n_filters = 2;
    cr.filters = filters;
    cr.prev_kv = 1;
    w.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    w.create_request = &cr;
    snprintf(want, sizeof want, "%s\n", x_json_watchreq);
    EXPECT(want, ctl_json_message(f, &w.base));
    EXPECT_HEX(x_pb_watchreq, ctl_pb_message(f, &w.base));
}

static void test_json_wrappers(void **state)
{
    struct ctl_ep_status st[2] = {{"e1", &X.st}, {"e2", &X.st2}};
    struct ctl_ep_hashkv hk[1] = {{"e1", &X.hkv}};
    (void)state;
    EXPECT(x_json_watch, ctl_json_watch_response(f, &X.watch, false));
    EXPECT(x_json_watch_nil, ctl_json_watch_response(f, &X.watch_nil, true));
    EXPECT(x_json_grant, ctl_json_lease_grant(f, &X.grant));
    EXPECT(x_json_grant_nohdr, ctl_json_lease_grant(f, &X.grant_nohdr));
    EXPECT(x_json_keepalive, ctl_json_lease_keepalive(f, &X.ka));
    EXPECT(x_json_ttl, ctl_json_lease_timetolive(f, &X.ttl));
    EXPECT(x_json_ttl_keys, ctl_json_lease_timetolive(f, &X.ttlk));
    EXPECT(x_json_leases, ctl_json_lease_leases(f, &X.leases));
    EXPECT(x_json_leases0, ctl_json_lease_leases(f, &X.leases0));
    EXPECT(x_json_health, ctl_json_endpoint_health(f, health, 2));
    EXPECT(x_json_health0, ctl_json_endpoint_health(f, NULL, 0));
    EXPECT(x_json_status, ctl_json_endpoint_status(f, st, 2));
    EXPECT(x_json_hashkv, ctl_json_endpoint_hashkv(f, hk, 1));
    EXPECT(x_json_dbstatus, ctl_json_db_status(f, &dbs));
}

static void test_json_builder(void **state)
{
    struct ctl_json j;
    (void)state;
    EXPECT("{\"a\":[1,-2,true,null,\"s\\u003c\",\"AP8=\",{}],\"b\":{},"
           "\"cluster_id\":15118495548433857066,\"member_id\":"
           "13668033151171901709,\"revision\":42,\"raft_term\":2,\"c\":{}}",
           {
               ctl_json_init(&j, f);
               ctl_json_begin_object(&j);
               ctl_json_key(&j, "a");
               ctl_json_begin_array(&j);
               ctl_json_u64(&j, 1);
               ctl_json_i64(&j, -2);
               ctl_json_bool(&j, true);
               ctl_json_null(&j);
               ctl_json_str(&j, "s<");
               ctl_json_bytes_b64(&j, "\000\377", 2);
               ctl_json_message_value(&j, &X.h_empty.base);
               ctl_json_end_array(&j);
               ctl_json_key(&j, "b");
               ctl_json_begin_object(&j);
               ctl_json_message_fields(&j, &X.h_empty.base);
               ctl_json_message_fields(&j, NULL);
               ctl_json_end_object(&j);
               ctl_json_message_fields(&j, &X.h.base);
               ctl_json_key(&j, "c");
               ctl_json_begin_object(&j);
               ctl_json_end_object(&j);
               ctl_json_end_object(&j);
           });
    /* Inlined members first in an object take no comma. */
    EXPECT("{\"revision\":5,\"x\":1}", {
        ctl_json_init(&j, f);
        ctl_json_begin_object(&j);
        ctl_json_message_fields(&j, &X.h5.base);
        ctl_json_key(&j, "x");
        ctl_json_u64(&j, 1);
        ctl_json_end_object(&j);
    });
}

/* ---- protobuf and text ---- */

static void test_pb_message(void **state)
{
    (void)state;
    EXPECT_HEX(x_pb_range, ctl_pb_message(f, &X.rng.base));
    EXPECT_HEX(x_pb_txn, ctl_pb_message(f, &X.txn.base));
    EXPECT_HEX(x_pb_members, ctl_pb_message(f, &X.members.base));
    EXPECT_HEX(x_pb_alarm, ctl_pb_message(f, &X.alarm.base));
    EXPECT_HEX(x_pb_status, ctl_pb_message(f, &X.st.base));
    EXPECT_HEX(x_pb_grant, ctl_pb_message(f, &X.grant.header->base));
    EXPECT_HEX(x_pb_watch, ctl_pb_watch_response(f, &X.watch));
    EXPECT_HEX(x_pb_watch_nil, ctl_pb_watch_response(f, &X.watch_nil));
    EXPECT_HEX("", assert_int_equal(ctl_pb_message(f, NULL), 0));
}

/* What etcdctl decodes and writes again loses the fields it does not
 * know: unknown ones, and cetcd's etcd 3.5 ones. */
static void test_pb_drops_unknown(void **state)
{
    /* HashKVResponse{hash: 1, compact_revision: 2, hash_revision: 3} and
     * an unknown field 9 (varint 5). */
    static const uint8_t in[] = {0x10, 0x01, 0x18, 0x02,
                                 0x20, 0x03, 0x48, 0x05};
    (void)state;
    ProtobufCMessage *m = protobuf_c_message_unpack(
        &etcdserverpb__hash_kvresponse__descriptor, NULL, sizeof in, in);
    assert_non_null(m);
    assert_int_equal(m->n_unknown_fields, 1);
    EXPECT_HEX("10011802", ctl_pb_message(f, m));
    EXPECT("{\"hash\":1,\"compact_revision\":2}\n", ctl_json_message(f, m));
    EXPECT("hash:1 compact_revision:2 ", ctl_text_message(f, m));
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_text_message(void **state)
{
    (void)state;
    EXPECT(x_text_hdr, ctl_text_message(f, &X.h.base));
    EXPECT(x_text_txn, ctl_text_message(f, &X.txn.base));
    EXPECT(x_revoke_err, ctl_pb_lease_revoke_error(f, &X.revoke));
    EXPECT(x_revoke_err_nil, ctl_pb_lease_revoke_error(f, &X.revoke_nil));
    EXPECT("table not supported as output format", ctl_unsupported(f, "table"));
}

/* ---- fields ---- */

static void test_fields(void **state)
{
    struct ctl_ep_status st[2] = {{"e1", &X.st}, {"e2", &X.st2}};
    struct ctl_ep_hashkv hk[1] = {{"e1", &X.hkv}};
    Etcdserverpb__PutResponse put = ETCDSERVERPB__PUT_RESPONSE__INIT;
    Etcdserverpb__DeleteRangeResponse del =
        ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
    (void)state;
    put.header = &X.h;
    put.prev_kv = &X.kv1;
    del.header = &X.h;
    del.deleted = 2;
    del.n_prev_kvs = 2;
    del.prev_kvs = X.kvs;
    EXPECT_BIN(x_fields_range, ctl_fields_range(f, &X.rng));
    EXPECT(x_fields_put, ctl_fields_put(f, &put));
    EXPECT(x_fields_del, ctl_fields_delete(f, &del));
    EXPECT(x_fields_txn, ctl_fields_txn(f, &X.txn));
    EXPECT(x_fields_watch, ctl_fields_watch(f, &X.watch));
    EXPECT(x_fields_members, ctl_fields_member_list(f, &X.members));
    EXPECT(x_fields_alarm, ctl_fields_alarm(f, &X.alarm));
    EXPECT(x_fields_roleget, ctl_fields_role_get(f, &X.roleget));
    EXPECT(x_fields_rolelist, ctl_fields_role_list(f, &X.rolelist));
    EXPECT(x_fields_grant, ctl_fields_lease_grant(f, &X.grant));
    EXPECT(x_fields_keepalive, ctl_fields_lease_keepalive(f, &X.ka));
    EXPECT(x_fields_ttl_keys, ctl_fields_lease_timetolive(f, &X.ttlk));
    EXPECT(x_fields_leases, ctl_fields_lease_leases(f, &X.leases));
    EXPECT(x_fields_health, ctl_fields_endpoint_health(f, health, 2));
    EXPECT(x_fields_status, ctl_fields_endpoint_status(f, st, 2));
    EXPECT(x_fields_hashkv, ctl_fields_endpoint_hashkv(f, hk, 1));
    EXPECT(x_fields_dbstatus, ctl_fields_db_status(f, &dbs));
}

/* ---- tables ---- */

#define TABLE(want, hdr, cells, nrows)                                         \
    EXPECT(want, assert_int_equal(ctl_table_print(f, hdr,                      \
                                                  sizeof hdr / sizeof hdr[0],  \
                                                  cells, nrows),               \
                                  0))

static void test_table_print(void **state)
{
    static const char *const h_utf8[] = {"a_b.c", "x.1", " y "};
    static const char *const c_utf8[] = {
        ("\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343"
         "\202\255\343\202\271\343\203\210"),
        "h\303\251llo w\303\266rld",
        "e\314\201",
        "a\nb",
        "multi\nline\ncell with words",
        "x  y"};
    static const char *const h_one[] = {"h"};
    static const char *const c_wrap[] = {
        "aaa bbb ccc ddd eee fff ggg hhh iii jjj kkk lll mmm nnn ooo",
        "averyveryveryveryveryveryverylongwordthatexceeds thirty",
        "one two  three   four", " lead and trail ",
        ("a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 "
         "7 8 9")};
    static const char *const h_c[] = {"c"};
    static const char *const c_esc[] = {
        "\033[31mred\033[0m", "tab\there", "\033[1234mx",
        ("\033[1mbold\033[0m and \033[4mmore\033[0m words to make it wrap "
         "around")};
    static const char *const h_wrap[] = {
        "a very long header with many words inside it", "0.5", "_.", "v1.2.x"};
    static const char *const c_hwrap[] = {"x", "y", "", NULL};
    static const char *const h_narrow[] = {"", "a"};
    static const char *const c_narrow[] = {"", "p\nq\nr", "", ""};
    static const char *const h_empty[] = {"endpoint", "health"};
    static const char *const h_e[] = {"e"};
    static const char *const c_emoji[] = {
        "\360\237\230\200\342\200\215\360\237\230\200|\360\237\207\257\360"
        "\237\207\265|\341\204\200\341\205\241\341\206\250|\340\244\225\340"
        "\244\277|\330\200a|a\314\201\314\201|\360\237\221\215\360\237\217"
        "\275"};
    (void)state;
    TABLE(x_table_utf8, h_utf8, c_utf8, 2);
    TABLE(x_table_wrap, h_one, c_wrap, 5);
    TABLE(x_table_esc, h_c, c_esc, 4);
    TABLE(x_table_hdrwrap, h_wrap, c_hwrap, 1);
    TABLE(x_table_narrow, h_narrow, c_narrow, 2);
    TABLE(x_table_empty, h_empty, NULL, 0);
    TABLE(x_table_emoji, h_e, c_emoji, 1);
}

static void test_rows(void **state)
{
    struct ctl_ep_status st[2] = {{"e1", &X.st}, {"e2", &X.st2}};
    struct ctl_ep_hashkv hk[1] = {{"e1", &X.hkv}};
    (void)state;
#define ROWS(want, call) EXPECT(want, assert_int_equal(call, 0))
    ROWS(x_table_members, ctl_rows_member_list(f, &X.members, true));
    ROWS(x_simple_members, ctl_rows_member_list(f, &X.members, false));
    ROWS(x_table_health, ctl_rows_endpoint_health(f, health, 2, true));
    ROWS(x_table_status, ctl_rows_endpoint_status(f, st, 2, true));
    ROWS(x_simple_status, ctl_rows_endpoint_status(f, st, 2, false));
    ROWS(x_table_hashkv, ctl_rows_endpoint_hashkv(f, hk, 1, true));
    ROWS(x_simple_hashkv, ctl_rows_endpoint_hashkv(f, hk, 1, false));
    ROWS(x_table_dbstatus, ctl_rows_db_status(f, &dbs, true));
    ROWS(x_simple_dbstatus, ctl_rows_db_status(f, &dbs, false));
#undef ROWS
}

/* Each allocation of a table may fail: the call says so and leaks
 * nothing (the ASan build checks the leaks). */
static void test_table_nomem(void **state)
{
    struct ctl_ep_status st[2] = {{"e1", &X.st}, {"e2", &X.st2}};
    (void)state;
    for (long n = 1;; n++) {
        struct cap c;
        FILE *f = cap_open(&c);
        mem_fault_set(n);
        int rc = ctl_rows_endpoint_status(f, st, 2, true);
        mem_fault_set(0);
        fclose(f);
        free(c.p);
        if (rc == 0)
            break;
        assert_int_equal(rc, ERR_NOMEM);
        assert_true(n < 1000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_humanize_bytes),
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_hex_escaped),
        cmocka_unit_test(test_display_width),
        cmocka_unit_test(test_simple),
        cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_json_message),
        cmocka_unit_test(test_json_oneof),
        cmocka_unit_test(test_json_wrappers),
        cmocka_unit_test(test_json_builder),
        cmocka_unit_test(test_pb_message),
        cmocka_unit_test(test_pb_drops_unknown),
        cmocka_unit_test(test_text_message),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_table_print),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_table_nomem),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
