//! `mail[:FIB]`: the classic mailer's delivery. Build a mail (from, to, subject, body) through
//! a builder, compute fib(FIB) (30 by default), render the mail to a sink and return the bytes
//! rendered. `--mail-sink stdout` prints each mail like the classic did.

use std::io::Write;
use std::sync::Arc;

use super::fib::fib;
use super::{parse_count, Entry, MailSink, Nature, TaskError, Workload, WorkloadOptions};
use crate::workload::gil;

pub(super) const ENTRY: Entry = Entry {
    name: "mail",
    usage: "mail[:FIB]",
    help: "build a mail, compute fib(FIB) (default 30), render it to the mail sink (the classic mailer's task)",
    parse,
};

const DEFAULT_FIB: u32 = 30;

fn parse(args: &str, opts: &WorkloadOptions) -> Result<Arc<dyn Workload>, String> {
    let fib_n = if args.is_empty() {
        DEFAULT_FIB
    } else {
        parse_count("FIB", args, 50)? as u32
    };
    Ok(Arc::new(MailWorkload {
        fib_n,
        sink: opts.mail_sink,
    }))
}

/// A rendered-to-be mail.
#[derive(Debug, Clone, PartialEq)]
pub struct Mail {
    from: String,
    to: String,
    subject: String,
    body: String,
}

/// Builds a [`Mail`] field by field, as mail libraries do.
#[derive(Debug, Default)]
pub struct MailBuilder {
    from: Option<String>,
    to: Option<String>,
    subject: Option<String>,
    body: Option<String>,
}

impl MailBuilder {
    /// Sets the sender.
    pub fn from(mut self, v: impl Into<String>) -> Self {
        self.from = Some(v.into());
        self
    }
    /// Sets the recipient.
    pub fn to(mut self, v: impl Into<String>) -> Self {
        self.to = Some(v.into());
        self
    }
    /// Sets the subject.
    pub fn subject(mut self, v: impl Into<String>) -> Self {
        self.subject = Some(v.into());
        self
    }
    /// Sets the body.
    pub fn body(mut self, v: impl Into<String>) -> Self {
        self.body = Some(v.into());
        self
    }
    /// The mail, or the name of the first missing field.
    pub fn build(self) -> Result<Mail, &'static str> {
        Ok(Mail {
            from: self.from.ok_or("from")?,
            to: self.to.ok_or("to")?,
            subject: self.subject.ok_or("subject")?,
            body: self.body.ok_or("body")?,
        })
    }
}

impl Mail {
    /// Starts a builder.
    pub fn builder() -> MailBuilder {
        MailBuilder::default()
    }

    /// Writes the mail in RFC 5322 shape and returns the bytes written.
    pub fn render(&self, out: &mut impl Write) -> std::io::Result<u64> {
        let text = format!(
            "From: {}\r\nTo: {}\r\nSubject: {}\r\n\r\n{}\r\n",
            self.from, self.to, self.subject, self.body
        );
        out.write_all(text.as_bytes())?;
        Ok(text.len() as u64)
    }
}

/// The mailer's delivery task.
pub struct MailWorkload {
    fib_n: u32,
    sink: MailSink,
}

impl Workload for MailWorkload {
    fn spec(&self) -> String {
        if self.fib_n == DEFAULT_FIB {
            "mail".into()
        } else {
            format!("mail:{}", self.fib_n)
        }
    }
    fn nature(&self) -> Nature {
        Nature::Cpu
    }
    fn task(&self, index: usize) -> Result<u64, TaskError> {
        let value = fib(self.fib_n);
        let mail = Mail::builder()
            .from("concur@example.com")
            .to(format!("user{index}@example.com"))
            .subject(format!("Delivery {index}"))
            .body(format!(
                "Hello user {index}, fib({}) = {value}.",
                self.fib_n
            ))
            .build()
            .map_err(|field| TaskError::new("mail", format!("missing {field}")))?;
        let io = |e: std::io::Error| TaskError::new("io", e.to_string());
        match self.sink {
            MailSink::Discard => mail.render(&mut std::io::sink()).map_err(io),
            MailSink::Stdout => gil::released(|| {
                let mut out = std::io::stdout().lock();
                let n = mail.render(&mut out)?;
                out.flush()?;
                Ok(n)
            })
            .map_err(io),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_requires_every_field() {
        assert_eq!(Mail::builder().from("a").build().unwrap_err(), "to");
        let m = Mail::builder()
            .from("a")
            .to("b")
            .subject("c")
            .body("d")
            .build()
            .unwrap();
        let mut out = Vec::new();
        assert_eq!(m.render(&mut out).unwrap(), out.len() as u64);
        assert!(String::from_utf8(out)
            .unwrap()
            .starts_with("From: a\r\nTo: b\r\n"));
    }

    #[test]
    fn a_delivery_renders_its_known_bytes() {
        let w = parse("20", &WorkloadOptions::default()).unwrap();
        assert_eq!(w.spec(), "mail:20");
        let seven = "From: concur@example.com\r\nTo: user7@example.com\r\nSubject: Delivery 7\r\n\r\nHello user 7, fib(20) = 6765.\r\n";
        assert_eq!(seven.len(), 103);
        assert_eq!(w.task(7).unwrap(), 103);
        // Index 10 has one more digit in each of its three places.
        assert_eq!(w.task(10).unwrap(), 106);
        assert_eq!(
            parse("", &WorkloadOptions::default()).unwrap().spec(),
            "mail"
        );
    }
}
