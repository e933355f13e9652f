//! The command line: every command, its arguments and its help text (clap).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use interlock_payments_sim::Tier;

const AFTER_HELP: &str = "\
Interlock journals an agent's side effect (say, a $20 refund) before it is sent, re-checks
its authority and premises right before the send and after any crash, and recovers by what
the target service can do: retry under the idempotency key (tier 1), look the effect up
(tier 2), or say AMBIGUOUS and hand it to a person (tier 3).

Start here:
  interlock demo 2          a refund, a crash after the send, a restart: paid once
  interlock demo naive      the same without the gate: paid twice

Then look at what the demo left behind (its folder is printed at the end):
  interlock verify .interlock-demo/2
  interlock receipt .interlock-demo/2 EFFECT_ID

An operator acts on a journal with:
  interlock lease grant DIR NAME --for 48h    authority for proposals naming the lease
  interlock lease revoke DIR NAME
  interlock approve DIR FILE                  an approval (JSON; FILE `-` reads stdin)
  interlock revoke-approval DIR ID

Every command acts on an existing journal folder and refuses a missing one, except
`lease grant`, which creates it (granting the first lease is how a journal is set up), and
`demo`. Where a folder goes, a shared journal's URL works too: sqlite:///path/journal.db
(many processes on one machine) or postgres://user@host/db (many machines); `recover` then
needs --payments FILE. A URL of anything else (file://) is refused. Bad input records
nothing.

--json prints one JSON document on stdout: for `recover` the list of outcomes
({effect_id, state, reason, executed, replayed, retry_after_ms, result, changed,
return_to}, spelled as the journal spells them: COMMITTED, conflicting_payload), for
`verify` the report ({ok, streams, entries, problems}), for `receipt` the receipt, for
the others {\"ok\": true, ...}. A failure is then also on stdout, as
{\"error\": {\"kind\", \"message\", \"field\"}} (`field`: the JSON pointer of an
invalid_field, with `problem`), and nothing is written to stderr. Without --json a failure
is one line on stderr.

Exit codes:
  0  ok
  1  the journal fails verification (a broken hash chain, an unparsable or torn line), or
     `recover` left an effect AMBIGUOUS or still open, or failed on one: a person must look
  2  usage or input error: bad arguments, invalid JSON or fields, a missing file or
     folder, a URL that names no journal, a journal that is locked or cannot be opened

The gate component is found with --wasm, $INTERLOCK_WASM, the build output of
`bash scripts/build-wasm.sh`, or next to this program.";

const GRANT_HELP: &str = "\
DIR is created when it does not exist (its parent must): granting the first lease is how a
journal is set up. A grant the gate refuses (an empty name, say) creates nothing.
The latest grant or revoke of a lease is what counts: granting again moves its expiry to the
new time, and grants a revoked lease anew.

Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

const APPROVE_HELP: &str = "\
The approval (schema: ARCHITECTURE.md, \"Approval\"):
  {\"approval\": \"apr-7\", \"approver\": \"manager@shop\",
   \"request\": {\"key\": \"refund:order_881\", \"effect\": {\"order\": \"order_881\", \"amount_cents\": 2000}},
   \"premises_seen\": {\"eligible\": true}, \"expires_at_ms\": 1800000000000}
It authorizes exactly the request whose key (or effect, without a key) it names; a proposal
names it as {\"authority\": {\"approval\": \"apr-7\"}}. Recording the same approval twice is
harmless; another request under an existing id is refused (invalid_field at /approval).

Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

const MCP_HELP: &str = "\
  interlock mcp-proxy --config interlock.mcp.json -- python3 payments_server.py
The configuration (the original's format; ARCHITECTURE.md, \"Tool gating\"):
  {\"journal_dir\": \".interlock/mcp\",
   \"tools\": {\"create_refund\": {
     \"key\": [\"order_id\"],
     \"premises\": {\"tool\": \"get_order\", \"arguments\": {\"order_id\": \"order_id\", \"excluding\": \"$effect_id\"}, \"fields\": [\"refunded_total\"]},
     \"lookup\": {\"tool\": \"find_refund\", \"arguments\": {\"reference\": \"$effect_id\"}, \"found\": \"found\"},
     \"idempotency_argument\": \"reference\",
     \"authority\": {\"lease\": \"refund-agent\"}}}}
Before it serves a call the proxy recovers every effect a crash left open. A call that is
not done (REFUSED, AMBIGUOUS, a bad call) answers isError with what changed and who to ask;
the outcome is in the result's structuredContent (and in _meta \"interlock/outcome\").

Exit codes: 0 the agent disconnected; 2 a bad configuration (at its JSON pointer) or an
upstream that does not start.";

const SERVE_HELP: &str = "\
  INTERLOCK_TOKEN=secret interlock serve .interlock/http --targets targets.json
The API is docs/http-api.yaml, the Worker's (hosts/edge): every request carries
`Authorization: Bearer <INTERLOCK_TOKEN>`; journals are /v1/journals/{name}/..., each a
subfolder of the folder given (or one shared journal's URL, served as --name). The
component (dist/interlock_http.wasm, world http-gate) decides everything; it reads its
settings from the environment this passes it: INTERLOCK_TOKEN (required), INTERLOCK_TARGETS
(or --targets FILE: the HTTP targets it performs itself), INTERLOCK_RECEIPT_KEY (HMAC
receipts) or INTERLOCK_SIGNING_KEY (Ed25519 receipts, bundles and log checkpoints:
interlock keygen), and INTERLOCK_STRICT_AUTHORITY (1: a proposal naming no lease or approval is refused; by default
it runs under its agent's standing lease).

Prints `listening on http://HOST:PORT` once it accepts requests. Exit codes: 2 a missing
token, bad targets or a component that does not load.";

const DECIDE_HELP: &str = "\
  interlock inbox .interlock
  interlock approve .interlock ITEM --as alice@shop --why \"customer verified\"
  interlock reject .interlock ITEM --as alice@shop --why \"fraud pattern\"
  interlock resolve .interlock ITEM --verdict did-not-happen --as ops@shop \\
      --evidence '{\"statement\": \"no refund re_ for order_881\"}'
A decider acts under a live lease in their own name (interlock lease grant DIR alice@shop
--for 30d): one whose lease was revoked decides nothing. An approval needs a person on the
item's route (its escalation approvers too, once escalated); a route may ask for --why and
for several distinct approvers. Two people deciding at once: one is recorded, the other is
told what was decided. After did-not-happen the effect is never sent again by itself: a new
request (a new key) is a new decision.

Exit codes: 0 recorded; 2 usage or input error (a decision too late or not allowed says
why), nothing recorded (`interlock --help`).";

const RULES_HELP: &str = "\
The rules (ARCHITECTURE.md, \"Approval rules\"):
  {\"rules\": [{\"name\": \"large\", \"target\": \"payments\",
              \"when\": [{\"field\": \"/effect/amount_cents\", \"over\": 5000}],
              \"then\": \"person\", \"route\": \"finance\", \"approvers_needed\": 2},
             {\"name\": \"small\", \"target\": \"payments\",
              \"when\": [{\"field\": \"/effect/amount_cents\", \"at_most\": 2000}], \"then\": \"approve\"}],
   \"routes\": {\"finance\": {\"primary_approvers\": [\"alice@shop\", \"bob@shop\"],
       \"duration_before_escalation_ms\": 3600000, \"escalation_approvers\": [\"cfo@shop\"],
       \"duration_before_expiry_ms\": 86400000, \"justification_required\": true}}}
The first rule that matches decides. A missed deadline escalates or expires: never a no.

Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

const CONFIRM_HELP: &str = "\
  STRIPE_WEBHOOK_SECRET=whsec_... interlock confirm .interlock --scheme stripe \\
      --secret-env STRIPE_WEBHOOK_SECRET --header \"Stripe-Signature: t=...,v1=...\" body.json
The event names its effect by metadata.interlock_effect_id (Stripe: the refund's metadata;
Standard Webhooks: data.interlock_effect_id). It is CONFIRMED when the service says it
happened; an AMBIGUOUS effect the service says failed is settled did-not-happen; a service
that contradicts the journal puts the effect in the inbox. A bad signature, a timestamp
outside 300 s, a replayed event or an unknown effect records nothing.

Exit codes: 0 recorded; 2 rejected (why on stderr), nothing recorded (`interlock --help`).";

const EFFECT_HELP: &str = "\
Two coding agents, one file (each commits on the commit it read; the second is refused,
told what changed):
  interlock effect JOURNAL --repo . --key task-17 \\
    --definition '{\"target\": \"repo\", \"builtin\": \"git.commit\", \"lease\": \"agent-a\"}' \\
    '{\"branch\": \"main\", \"base\": \"<commit read>\", \"files\": {\"src/lib.rs\": \"...\"}, \"message\": \"...\"}'
  interlock effect JOURNAL --repo . --definition '...'      # no EFFECT: recover the open ones
Exit codes: 0 COMMITTED; 1 REFUSED, AMBIGUOUS or still open (--json: the outcome); 2 usage or
input error, nothing recorded.";

const PROOF_HELP: &str = "\
Keys are Ed25519 in the C2SP signed-note encoding (golang.org/x/mod/sumdb/note):
  public  NAME+KEYID+BASE64            anyone checks with it
  private PRIVATE+KEY+NAME+KEYID+BASE64  a file of its own, owner-only; never on the
                                        command line, never printed
  interlock keygen shop.example/interlock --private-key shop.key --public-key shop.pub
  interlock receipt DIR EFFECT_ID --signing-key shop.key > receipt.json
  interlock check-receipt receipt.json --public-key shop.pub          # the signature alone
  interlock check-receipt receipt.json --public-key shop.pub --journal DIR   # and the journal
  interlock checkpoint DIR --signing-key shop.key     # log what closed since, sign the tree
  interlock prove inclusion DIR EFFECT_ID > proof.json
  interlock check-inclusion proof.json --public-key shop.pub
  interlock prove consistency DIR --old-checkpoint old.txt > cons.json
  interlock check-consistency cons.json --old-checkpoint old.txt --public-key shop.pub
  interlock bundle DIR --from-ms A --to-ms B --signing-key shop.key > bundle.json
  interlock check-bundle bundle.json --public-key shop.pub
A key may come from the environment instead: --signing-key-env VAR, --public-key-env VAR.

Exit codes: 0 holds; 1 a signature, proof or journal check fails (what and where);
2 usage or input error: a missing or malformed key, a document cut short or of an unknown
version (nothing is written).";

const EXPORT_HELP: &str = "\
The position is the journal stream export:NAME: SENDING before a batch leaves, SENT after
the receiver took it. After a crash the batch in doubt is sent again first, the same records
under the same ids (span ids from the effect id; insertId and OCSF metadata.uid the entry's
hash); a file is cut back to where the batch began. Nothing after it is skipped.

Exit codes: 0 exported; 1 the sink did not take a batch (the position stays); 2 refused
(unknown sink, bad URL, a file that does not hold what was written), nothing recorded.";

const REVOKE_HELP: &str = "\
Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

#[derive(Parser)]
#[command(name = "interlock", version, about = "A safety gate for an AI agent's side effects", after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Use a fake wall clock fixed at this Unix time in milliseconds, for reproducible runs
    /// (waits advance it instead of sleeping).
    #[arg(long, global = true, value_name = "MS")]
    pub(crate) clock_ms: Option<u64>,
    /// The gate component (.wasm).
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) wasm: Option<PathBuf>,
    /// Print one JSON document on stdout, failures included (`interlock --help` says which).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// How long to wait for the lock of a file journal another writer holds (default 5000;
    /// 0: fail at once).
    #[arg(long, global = true, value_name = "MS")]
    pub(crate) lock_wait_ms: Option<u64>,
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Run the story of the fault catalogue: a $20 refund, a crash after the send, a restart.
    Demo {
        /// `naive` (no gate, plain retry) or the payments API's tier: 1 (dedupes),
        /// 2 (lookup), 3 (neither).
        mode: Mode,
        /// Where the journal and the payments state go [default: ./.interlock-demo/MODE].
        /// Wiped at start, so it must be empty or an earlier demo's folder.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Keep the journal in this new shared journal instead (sqlite:///path.db,
        /// postgres://...): the worker that crashes and the one that recovers are two
        /// processes on one database, as on two machines. The payments state stays in DIR.
        #[arg(long, value_name = "URL")]
        journal: Option<PathBuf>,
    },
    /// Recover every open effect in a journal against the payments service (exit 1 when
    /// one is left AMBIGUOUS or open).
    Recover {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
        /// The payments service's state file [default: DIR/payments.json; required for a URL].
        #[arg(long, value_name = "FILE")]
        payments: Option<PathBuf>,
        /// Leave effects whose claim another worker still holds to that worker (reported
        /// open, `claim_live`) instead of waiting the claims out: for one of many recovering
        /// workers on a shared journal.
        #[arg(long)]
        no_wait: bool,
    },
    /// Verify every stream's hash chain (exit 1 on any problem, a torn last line included;
    /// 2 when it cannot be checked: no folder, locked, an unreadable receipt).
    Verify {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
        /// Receipts (JSON files) that pin their streams, so truncation is caught too.
        #[arg(long = "receipt", value_name = "FILE")]
        receipts: Vec<PathBuf>,
        /// Checkpoints of the journal's log you hold (signed notes): its first leaves must
        /// still be those.
        #[arg(long = "checkpoint", value_name = "FILE")]
        checkpoints: Vec<PathBuf>,
    },
    /// Print an effect's receipt as JSON.
    Receipt {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
        /// The effect id (32 hex digits).
        effect: String,
        /// Sign the receipt with HMAC-SHA256 under the bytes of this file.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["signing_key", "signing_key_env"])]
        key_file: Option<PathBuf>,
        #[command(flatten)]
        signing: SigningKeyArgs,
    },
    /// Make an Ed25519 key pair for signed receipts, bundles and the log's checkpoints.
    #[command(after_help = PROOF_HELP)]
    Keygen {
        /// The key's name, and the log's origin in its checkpoints (a schema-less URL such
        /// as shop.example/interlock).
        name: String,
        /// Where to write the private key: a new file, owner-only (0600).
        #[arg(long, value_name = "FILE")]
        private_key: PathBuf,
        /// Also write the public key to this new file (it is printed either way).
        #[arg(long, value_name = "FILE")]
        public_key: Option<PathBuf>,
    },
    /// Check a signed receipt: with --public-key anyone can (Ed25519); with --journal it
    /// must also match the journal it pins (its stream, its anchors, its decisions).
    #[command(after_help = PROOF_HELP)]
    CheckReceipt {
        /// The receipt (JSON), or `-` for stdin.
        receipt: PathBuf,
        #[command(flatten)]
        public: PublicKeyArgs,
        /// An HMAC receipt's key instead (the bytes of this file; needs --journal).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["public_key", "public_key_env"], requires = "journal")]
        key_file: Option<PathBuf>,
        /// The journal the receipt is of (a folder or a shared journal's URL).
        #[arg(long, value_name = "DIR|URL")]
        journal: Option<PathBuf>,
    },
    /// Append the receipt of every effect closed since to the journal's transparency log and
    /// sign a checkpoint of it (C2SP tlog-checkpoint). Durable; prints the checkpoint.
    #[command(after_help = PROOF_HELP)]
    Checkpoint {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        #[command(flatten)]
        signing: SigningKeyArgs,
    },
    /// Print a proof from the journal's log: an effect's inclusion, or the log's
    /// consistency with an older checkpoint.
    #[command(after_help = PROOF_HELP)]
    Prove {
        #[command(subcommand)]
        what: ProveCmd,
    },
    /// Check an inclusion proof with the log's public key.
    #[command(after_help = PROOF_HELP)]
    CheckInclusion {
        /// The proof (JSON), or `-` for stdin.
        proof: PathBuf,
        #[command(flatten)]
        public: PublicKeyArgs,
        /// Check against this checkpoint (one you hold) instead of the proof's own.
        #[arg(long, value_name = "FILE")]
        checkpoint: Option<PathBuf>,
    },
    /// Check a consistency proof from a checkpoint you hold: nothing before it was rewritten.
    #[command(after_help = PROOF_HELP)]
    CheckConsistency {
        /// The proof (JSON), or `-` for stdin.
        proof: PathBuf,
        /// The older checkpoint you hold.
        #[arg(long, value_name = "FILE")]
        old_checkpoint: PathBuf,
        #[command(flatten)]
        public: PublicKeyArgs,
    },
    /// Print a signed bundle of the receipts of every effect proposed in a period.
    #[command(after_help = PROOF_HELP)]
    Bundle {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The period's start (Unix ms, included).
        #[arg(long, value_name = "MS", default_value_t = 0)]
        from_ms: u64,
        /// The period's end (Unix ms, excluded) [default: now].
        #[arg(long, value_name = "MS")]
        to_ms: Option<u64>,
        #[command(flatten)]
        signing: SigningKeyArgs,
    },
    /// Check a bundle with the public key and answer, per effect: did it happen once, was
    /// it authorized when it fired, did its premises hold, who decided, did the service
    /// confirm.
    #[command(after_help = PROOF_HELP)]
    CheckBundle {
        /// The bundle (JSON), or `-` for stdin.
        bundle: PathBuf,
        #[command(flatten)]
        public: PublicKeyArgs,
    },
    /// Cut a torn last line off a journal (it is saved to a side file first).
    Repair {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
    },
    /// Grant or revoke a lease: the authority a proposal names as `authority.lease`.
    Lease {
        #[command(subcommand)]
        action: LeaseCmd,
    },
    /// Approve an inbox item as a person (`--as NAME`), or record an approval (FILE):
    /// authority for exactly one request. Durable on return.
    #[command(after_help = APPROVE_HELP)]
    Approve {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// With --as: the inbox item (its `item`). Without: the approval JSON, or `-` to
        /// read it from stdin.
        file: PathBuf,
        #[command(flatten)]
        person: Person,
    },
    /// Reject an inbox item as a person: the effect is refused (`approval_rejected`).
    #[command(after_help = DECIDE_HELP)]
    Reject {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The inbox item (its `item`).
        item: String,
        #[command(flatten)]
        person: Person,
    },
    /// Settle an AMBIGUOUS effect (it happened, or it did not, with evidence), or dismiss
    /// a refused one from the inbox.
    #[command(after_help = DECIDE_HELP)]
    Resolve {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The inbox item (its `item`).
        item: String,
        /// What you found.
        #[arg(long, value_enum)]
        verdict: Verdict,
        /// What shows it (JSON), e.g. '{"statement": "re_123 on 12-02"}'; required for
        /// happened and did-not-happen.
        #[arg(long, value_name = "JSON")]
        evidence: Option<String>,
        #[command(flatten)]
        person: Person,
    },
    /// Export the journal to the tools operators run: OpenTelemetry (OTLP/HTTP), BigQuery,
    /// Cloud Logging or a SIEM (OCSF), from the position recorded in the journal on.
    #[command(after_help = EXPORT_HELP)]
    Export {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// otlp=URL (an OTLP/HTTP receiver's base URL), bigquery, cloud-logging or siem.
        #[arg(long, value_name = "SINK")]
        to: String,
        /// The JSON lines file of bigquery, cloud-logging and siem.
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
        /// The position's name [default: the sink's]: one per destination.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// OTLP spans carry the tool's arguments and result (opt-in in the conventions).
        #[arg(long)]
        content: bool,
        /// Records per batch.
        #[arg(long, value_name = "N", default_value_t = 512)]
        batch: u32,
    },
    /// The inbox: every item a person may act on now (pending and escalated approvals,
    /// approvals returned with what changed, AMBIGUOUS effects, refused ones), from the
    /// journal.
    Inbox {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
    },
    /// The scoreboard: approval items by route (pending, escalated, approved, rejected,
    /// expired), time to decision, deadlines missed, the share approved by rule.
    Scoreboard {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
    },
    /// Record the approval rules and routes (JSON; FILE `-` reads stdin). Durable.
    #[command(after_help = RULES_HELP)]
    Rules {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The rules JSON, or `-` to read it from stdin; without it, print the rules in force.
        file: Option<PathBuf>,
    },
    /// Record what a service's signed webhook confirms (the body from FILE or `-`).
    #[command(after_help = CONFIRM_HELP)]
    Confirm {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// How the service signs.
        #[arg(long, value_enum)]
        scheme: Scheme,
        /// The environment variable holding the webhook secret (never on the command line).
        #[arg(long, value_name = "VAR")]
        secret_env: String,
        /// A header as received, `Name: value` (repeat for several).
        #[arg(long = "header", value_name = "HEADER")]
        headers: Vec<String>,
        /// The raw body, or `-` for stdin.
        body: PathBuf,
    },
    /// Revoke an approval: every later dispatch or recovery under it is refused. Durable.
    #[command(after_help = REVOKE_HELP)]
    RevokeApproval {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The approval's id (its `approval` field).
        id: String,
    },
    /// Put the gate in front of an MCP server: the agent talks to this proxy instead, with no
    /// code change on either side. Only the tools the configuration names are gated.
    #[command(after_help = MCP_HELP)]
    McpProxy {
        /// The configuration (JSON): which tools are effects, their key, premise tool, lookup
        /// tool and idempotency argument, and the `decider` who may approve a call at the
        /// agent's client, by MCP elicitation (ARCHITECTURE.md, "Tool gating").
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Serve MCP over Streamable HTTP at http://HOST:PORT/mcp instead of stdio.
        #[arg(long, value_name = "HOST:PORT")]
        listen: Option<String>,
        /// The real server over Streamable HTTP, instead of a command to start.
        #[arg(long, value_name = "URL", conflicts_with = "command")]
        upstream: Option<String>,
        /// The agent the journal names as proposing each effect.
        #[arg(long, default_value = "mcp-proxy")]
        agent: String,
        /// The lease gated calls are made under when their tool's configuration names no
        /// authority (grant it first: `interlock lease grant JOURNAL NAME --for 48h`).
        /// Without it (and without --strict) such calls run under the agent's standing
        /// lease, granted and recorded at first use; the proxy says so on stderr at start.
        #[arg(long, value_name = "NAME")]
        lease: Option<String>,
        /// Strict authority: refuse to start when a gated tool names no authority and no
        /// --lease is given, instead of running it under the agent's standing lease.
        #[arg(long)]
        strict: bool,
        /// The journal (a folder or a shared journal's URL) [default: the configuration's
        /// `journal_dir`, else .interlock/mcp].
        #[arg(long, value_name = "DIR|URL")]
        journal: Option<PathBuf>,
        /// The real server's command and its arguments.
        #[arg(last = true, value_name = "SERVER COMMAND")]
        command: Vec<String>,
    },
    /// Serve the gate's HTTP API (docs/http-api.yaml) from the wasi:http component, one
    /// instance per journal, as the Cloudflare Worker serves it from a Durable Object.
    #[command(after_help = SERVE_HELP)]
    Serve {
        /// The journals: a folder (one subfolder per journal name), or a shared journal's URL
        /// (sqlite:///..., postgres://...), served as the one journal --name.
        journals: PathBuf,
        /// Where to listen (port 0: any free port, printed).
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8787")]
        listen: std::net::SocketAddr,
        /// The HTTP targets the server performs itself (JSON; docs/http-api.yaml), instead
        /// of INTERLOCK_TARGETS.
        #[arg(long, value_name = "FILE")]
        targets: Option<PathBuf>,
        /// The journal's name when JOURNALS is a shared journal's URL.
        #[arg(long, default_value = "main")]
        name: String,
        /// The wasi:http component [default: dist/interlock_http.wasm, or $INTERLOCK_HTTP_WASM].
        #[arg(long, value_name = "PATH")]
        component: Option<PathBuf>,
        /// Deliver the notices due (an approval item entered, escalated or expired: to its
        /// route's `notify_url`, signed with INTERLOCK_NOTIFY_SECRET) every SECONDS.
        #[arg(long, value_name = "SECONDS")]
        notify_every: Option<u64>,
    },
    /// Gate one effect of a built-in target (postgres.insert, git.commit, git.merge,
    /// git.push, smtp.send; docs/targets.md), or, with no EFFECT, recover the open effects of
    /// the definition's target. Prints the outcome (exit 0 when it is COMMITTED, 1 when it is
    /// anything else: REFUSED, AMBIGUOUS, still open).
    #[command(after_help = EFFECT_HELP)]
    Effect(EffectArgs),
    /// The demo's child processes (run by `demo`).
    #[command(hide = true)]
    DemoChild {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        phase: Phase,
        #[arg(long)]
        journal: Option<PathBuf>,
    },
}

/// `interlock effect`'s arguments.
#[derive(Args)]
pub(crate) struct EffectArgs {
    /// The journal: a folder (it must exist), or a shared journal's URL.
    pub(crate) dir: PathBuf,
    /// The effect definition (JSON, or @FILE): `{"target": NAME, "builtin":
    /// "git.commit", "lease": ..., "timeout_ms": ...}` (ARCHITECTURE.md, "Effect definition").
    #[arg(long, value_name = "JSON")]
    pub(crate) definition: String,
    /// The effect (JSON, or @FILE); without it (and without --proposal), recover.
    pub(crate) effect: Option<String>,
    /// Print the proposal EFFECT would submit (its premises read now), recording
    /// nothing: the decision, to send later with --proposal.
    #[arg(long)]
    pub(crate) propose: bool,
    /// Submit this proposal (JSON, or @FILE), made earlier with --propose.
    #[arg(long, value_name = "JSON")]
    pub(crate) proposal: Option<String>,
    /// The effect's key: the approved request it comes from (JSON, or plain text).
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// The lease it is made under (instead of the definition's).
    #[arg(long)]
    pub(crate) lease: Option<String>,
    /// The approval it is made under.
    #[arg(long)]
    pub(crate) approval: Option<String>,
    /// The agent the journal names as proposing it.
    #[arg(long, default_value = "agent")]
    pub(crate) agent: String,
    /// postgres.insert: the database.
    #[arg(long, value_name = "URL")]
    pub(crate) postgres: Option<String>,
    /// git.*: the repository.
    #[arg(long, value_name = "DIR")]
    pub(crate) repo: Option<PathBuf>,
    /// smtp.send: the server.
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) smtp: Option<String>,
    /// For tests: stop at this point as a killed process would.
    #[arg(long, value_enum, hide = true)]
    pub(crate) crash_at: Option<CrashAt>,
}

#[derive(Subcommand)]
pub(crate) enum ProveCmd {
    /// The inclusion proof of an effect's logged receipt.
    Inclusion {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The effect id (32 hex digits).
        effect: String,
        /// In the tree of this many leaves (a checkpoint of it must have been signed)
        /// [default: the latest checkpoint's].
        #[arg(long, value_name = "N")]
        tree_size: Option<u64>,
    },
    /// The consistency proof from an older checkpoint to the latest.
    Consistency {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The older checkpoint (its size is read from it)...
        #[arg(
            long,
            value_name = "FILE",
            conflicts_with = "old_size",
            required_unless_present = "old_size"
        )]
        old_checkpoint: Option<PathBuf>,
        /// ... or the older tree's size.
        #[arg(long, value_name = "N")]
        old_size: Option<u64>,
        /// To the tree of this many leaves [default: the latest checkpoint's].
        #[arg(long, value_name = "N")]
        tree_size: Option<u64>,
    },
}

/// Where the private key comes from: a file, or an environment variable (never the command
/// line).
#[derive(Args)]
pub(crate) struct SigningKeyArgs {
    /// Sign with Ed25519 under the private key in this file (interlock keygen).
    #[arg(long, value_name = "FILE", conflicts_with = "signing_key_env")]
    pub(crate) signing_key: Option<PathBuf>,
    /// ... or in this environment variable.
    #[arg(long, value_name = "VAR")]
    pub(crate) signing_key_env: Option<String>,
}

/// Where the public key comes from.
#[derive(Args)]
pub(crate) struct PublicKeyArgs {
    /// The public key (interlock keygen), in this file.
    #[arg(long, value_name = "FILE", conflicts_with = "public_key_env")]
    pub(crate) public_key: Option<PathBuf>,
    /// ... or in this environment variable.
    #[arg(long, value_name = "VAR")]
    pub(crate) public_key_env: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum LeaseCmd {
    /// Grant, or extend, a lease until a time. Durable on return.
    #[command(after_help = GRANT_HELP)]
    Grant {
        /// The journal folder (created when missing, see below).
        dir: PathBuf,
        /// The lease's name, as proposals give it in `authority.lease`.
        name: String,
        #[command(flatten)]
        until: Until,
    },
    /// Revoke a lease: every later dispatch or recovery under it is refused. Durable.
    #[command(after_help = REVOKE_HELP)]
    Revoke {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The lease's name.
        name: String,
    },
}

/// When a granted lease expires: one of the two.
/// Who decides, and why.
#[derive(Args)]
pub(crate) struct Person {
    /// Who decides: a person with a live lease in their name, on the item's route.
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) decider: Option<String>,
    /// Why (some routes require it).
    #[arg(long, value_name = "TEXT")]
    pub(crate) why: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Verdict {
    Happened,
    DidNotHappen,
    Dismiss,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Happened => "happened",
            Verdict::DidNotHappen => "did_not_happen",
            Verdict::Dismiss => "dismiss",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum CrashAt {
    BeforeSend,
    AfterSend,
    InRecovery,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Scheme {
    Stripe,
    StandardWebhooks,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub(crate) struct Until {
    /// Until this Unix time in milliseconds.
    #[arg(long, value_name = "MS")]
    pub(crate) until_ms: Option<u64>,
    /// For this long from now (the --clock-ms clock): a whole number and a unit, ms, s, m,
    /// h or d, such as 48h.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) for_ms: Option<u64>,
}

/// `48h` -> 172800000 (ms).
pub(crate) fn parse_duration(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("{s:?} is not a duration: a whole number and a unit (ms, s, m, h, d), such as 48h")
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms)
        .ok_or_else(|| format!("{s:?} is too long"))
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Mode {
    Naive,
    #[value(name = "1")]
    Tier1,
    #[value(name = "2")]
    Tier2,
    #[value(name = "3")]
    Tier3,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Naive => "naive",
            Mode::Tier1 => "1",
            Mode::Tier2 => "2",
            Mode::Tier3 => "3",
        }
    }

    pub(crate) fn tier(self) -> Tier {
        match self {
            Mode::Tier1 => Tier::ONE,
            Mode::Tier2 => Tier::TWO,
            // Plain retry sends no key, so the tier does not matter; 3 is the honest case.
            Mode::Tier3 | Mode::Naive => Tier::THREE,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Phase {
    /// Gated: submit the proposal, die after the service committed.
    Send,
    /// No gate: refund, die before the ack.
    NaiveSend,
    /// No gate: the restarted process re-runs the step.
    NaiveRerun,
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("48h"), Ok(48 * 3_600_000));
        assert_eq!(parse_duration("30m"), Ok(1_800_000));
        assert_eq!(parse_duration("10s"), Ok(10_000));
        assert_eq!(parse_duration("250ms"), Ok(250));
        assert_eq!(parse_duration("2d"), Ok(172_800_000));
        for bad in [
            "",
            "48",
            "h",
            "-1h",
            "1.5h",
            "1 h",
            "1w",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
