@extends('layout')

@section('title', 'Guestbook')

@section('content')
    <h1>Guestbook</h1>
    <ul>
        @foreach ($messages as $message)
            <li><b>{{ $message->name }}</b>: {{ $message->body }}</li>
        @endforeach
    </ul>
    @if ($errors->any())
        <ul class="errors">
            @foreach ($errors->all() as $error)
                <li>{{ $error }}</li>
            @endforeach
        </ul>
    @endif
    <form method="post" action="{{ route('guestbook') }}">
        @csrf
        <label>Name <input name="name" value="{{ old('name') }}"></label>
        @error('name')<span class="error">{{ $message }}</span>@enderror
        <label>Message <textarea name="message">{{ old('message') }}</textarea></label>
        @error('message')<span class="error">{{ $message }}</span>@enderror
        <button>Sign</button>
    </form>
@endsection
