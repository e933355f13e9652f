//! `exporter`: the core's exporter over this instance's journal. Translation only.
use alloc::string::{String, ToString};
use core::cell::RefCell;

use interlock_core::export::{self as ex, ExportError, Exporter};

use crate::exports::interlock::gate::exporter as we;
use crate::storage::with_ordered;
use crate::{now_ms, to_wit_journal_err, Component};

/// The instance's one open export. Wasm components are single-threaded.
struct One(RefCell<Option<Exporter>>);
unsafe impl Sync for One {}
static EXPORT: One = One(RefCell::new(None));

fn err(e: ExportError) -> we::ExportError {
    // A case that carries text carries the core's whole sentence (its Display).
    let text = e.to_string();
    match e {
        ExportError::UnknownSink(_) => we::ExportError::UnknownSink(text),
        ExportError::InvalidDestination(_) => we::ExportError::InvalidDestination(text),
        ExportError::InvalidName(_) => we::ExportError::InvalidName(text),
        ExportError::Elsewhere { recorded, given } => we::ExportError::Elsewhere(we::Elsewhere {
            recorded,
            given,
            message: text,
        }),
        ExportError::FileMismatch(_) => we::ExportError::FileMismatch(text),
        ExportError::UnknownBatch(id) => we::ExportError::UnknownBatch(id),
        ExportError::NotOpen => we::ExportError::NotOpen,
        ExportError::Journal(j) => we::ExportError::Journal(to_wit_journal_err(j)),
        ExportError::CorruptJournal(_) => we::ExportError::CorruptJournal(text),
        ExportError::Contention(_) => we::ExportError::Contention(text),
    }
}

fn sink(s: ex::Sink) -> we::Sink {
    match s {
        ex::Sink::Otlp => we::Sink::Otlp,
        ex::Sink::Bigquery => we::Sink::Bigquery,
        ex::Sink::CloudLogging => we::Sink::CloudLogging,
        ex::Sink::Siem => we::Sink::Siem,
    }
}

fn with_export<R>(
    f: impl FnOnce(&mut Exporter, &mut dyn ex::ExportJournal) -> Result<R, ExportError>,
) -> Result<R, we::ExportError> {
    let mut slot = EXPORT.0.borrow_mut();
    let e = slot.as_mut().ok_or(we::ExportError::NotOpen)?;
    with_ordered(|j| f(e, j)).map_err(err)
}

impl we::Guest for Component {
    fn open(
        to: String,
        out: Option<String>,
        name: Option<String>,
        content: bool,
        file_length: Option<u64>,
    ) -> Result<we::Opened, we::ExportError> {
        let target = ex::parse_target(&to, out.as_deref()).map_err(err)?;
        let otlp = (target.sink == ex::Sink::Otlp).then(|| ex::otlp_urls(&target.destination));
        let (exporter, o) =
            with_ordered(|j| Exporter::open(j, target, name.as_deref(), content, file_length))
                .map_err(err)?;
        *EXPORT.0.borrow_mut() = Some(exporter);
        let (traces_url, metrics_url) = otlp.unzip();
        Ok(we::Opened {
            sink: sink(o.sink),
            destination: o.destination,
            traces_url,
            metrics_url,
            stream: o.stream,
            exported: o.exported,
            truncate_to: o.truncate_to,
            in_doubt: o.in_doubt,
        })
    }

    fn next(max_records: u32) -> Result<Option<we::Batch>, we::ExportError> {
        let b = with_export(|e, j| e.next(j, now_ms(), max_records as usize))?;
        Ok(b.map(|b| we::Batch {
            id: b.id,
            records: b.records,
            resend: b.resend,
            exported: b.exported,
            file_length: b.file_length,
        }))
    }

    fn sent(id: u64, file_length: Option<u64>) -> Result<(), we::ExportError> {
        with_export(|e, j| e.sent(j, now_ms(), id, file_length))
    }

    fn otlp_resource() -> String {
        ex::resource_json()
    }
}
